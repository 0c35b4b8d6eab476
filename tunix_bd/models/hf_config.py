# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face `config.json` to and from Tunix's Qwen3 and Qwen2 configs.

Tunix parses no `config.json`: its presets are hand-written. This module maps
every field that changes the model's math and rejects, naming the field, any
setting the Tunix model cannot represent (RoPE scaling, biases, sliding
windows...), so a checkpoint never runs silently as a different model.
`model_config_from_hf` and `config_to_hf` pick the family from `model_type`
(`qwen3`, `qwen3_moe`, `qwen2`) and from the config class.
"""

from typing import Any

import jax.numpy as jnp
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd import compat

# Tunix's Qwen3 attention rotates with this base whatever
# `ModelConfig.rope_theta` says (`compat.ROPE_THETA_APPLIED`). Any other
# theta is rejected.
TUNIX_ROPE_THETA = compat.ROPE_THETA_APPLIED["qwen3"]

ARCHITECTURES = {
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
}
_DTYPES = {
    "float32": jnp.float32,
    "bfloat16": jnp.bfloat16,
    "float16": jnp.float16,
}
_MOE_FIELDS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")


def _field(hf_config: dict[str, Any], key: str) -> Any:
  if hf_config.get(key) is None:
    raise ValueError(f"HF config is missing required field {key!r}.")
  return hf_config[key]


def _positive_int(hf_config: dict[str, Any], key: str) -> int:
  value = _field(hf_config, key)
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f"HF config {key}={value!r} must be a positive integer.")
  return value


def check_dtype(name: str, value: Any) -> Any:
  """`value` as one of the supported JAX dtypes; `name` is the setting.

  Raises:
    ValueError: naming `name`, for anything but float32, bfloat16, float16.
  """
  try:
    key = jnp.dtype(value).name
  except TypeError as e:
    raise ValueError(f"{name}={value!r} is not a dtype.") from e
  if key not in _DTYPES:
    raise ValueError(f"{name}={value!r} is not one of {sorted(_DTYPES)}.")
  return _DTYPES[key]


def _rope_theta(hf_config: dict[str, Any], label: str, applied: Any) -> Any:
  """The RoPE base, after checking that the Tunix model implements the RoPE.

  Args:
    hf_config: the parsed `config.json`.
    label: the family, for messages.
    applied: the base the family's attention rotates with whatever its
      config says (`compat.ROPE_THETA_APPLIED`), or None if it applies the
      config's.
  """
  theta = hf_config.get("rope_theta")
  # Legacy `rope_scaling` and transformers>=5 `rope_parameters`.
  for key in ("rope_scaling", "rope_parameters"):
    rope = hf_config.get(key)
    if rope is None:
      continue
    if not isinstance(rope, dict):
      raise ValueError(f"HF config {key}={rope!r} must be a dict or null.")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
      raise ValueError(
          f"HF config {key} has rope_type {rope_type!r}; Tunix {label} only"
          " implements the default RoPE."
      )
    unknown = sorted(set(rope) - {"rope_type", "type", "rope_theta"})
    if unknown:
      raise ValueError(f"HF config {key} has unsupported keys {unknown}.")
    if "rope_theta" in rope:
      if theta is not None and rope["rope_theta"] != theta:
        raise ValueError(
            f"HF config {key}.rope_theta={rope['rope_theta']!r} conflicts"
            f" with rope_theta={theta!r}."
        )
      theta = rope["rope_theta"]
  if theta is None:
    raise ValueError(
        "HF config is missing required field 'rope_theta' (Hugging Face"
        " would default it to 10000)."
    )
  if isinstance(theta, bool) or not isinstance(theta, (int, float)):
    raise ValueError(f"HF config rope_theta={theta!r} must be a number.")
  if applied is not None and theta != applied:
    raise ValueError(
        f"HF config rope_theta={theta!r} is not supported: Tunix {label}"
        f" always applies RoPE with theta {applied}."
    )
  if theta <= 0:
    raise ValueError(f"HF config rope_theta={theta!r} must be positive.")
  return int(theta) if float(theta).is_integer() else float(theta)


# Settings that change the math but the Tunix models lack:
# (field, transformers' default, accepted(value), what Tunix does).
_FIXED_FIELDS = (
    ("hidden_act", "silu", lambda v: v == "silu", "it uses silu"),
    ("use_sliding_window", False, lambda v: not v, "it has full attention"),
    (
        "layer_types",
        None,
        lambda v: all(t == "full_attention" for t in v or []),
        "it has full attention",
    ),
    ("attention_dropout", 0.0, lambda v: not v, "it has no dropout"),
    ("partial_rotary_factor", 1.0, lambda v: v == 1.0, "it rotates all dims"),
    ("quantization_config", None, lambda v: v is None, "it is unquantized"),
)
# Qwen2 always has q/k/v biases (and Tunix's Qwen2 too); Qwen3 has none.
_FIXED_QWEN3_FIELDS = (
    ("attention_bias", False, lambda v: not v, "it has no attention bias"),
    ("mlp_bias", False, lambda v: not v, "it has no MLP bias"),
)
_FIXED_MOE_FIELDS = (
    # Hugging Face defaults norm_topk_prob to false.
    ("norm_topk_prob", False, lambda v: v is True, "it renormalizes top-k"),
    ("decoder_sparse_step", 1, lambda v: v == 1, "every layer is MoE"),
    ("mlp_only_layers", None, lambda v: not v, "every layer is MoE"),
    ("shared_expert_intermediate_size", 0, lambda v: not v, "no shared expert"),
)


def _check_fixed(
    hf_config: dict[str, Any], fields: tuple[Any, ...], label: str
) -> None:
  for key, default, accepted, reason in fields:
    value = hf_config.get(key, default)
    if not accepted(value):
      raise ValueError(
          f"HF config {key}={value!r} is not supported by Tunix {label}:"
          f" {reason}."
      )


def _check_type(hf_config: Any, model_types: tuple[str, ...]) -> str:
  """The `model_type`, after checking it and `architectures`."""
  if not isinstance(hf_config, dict):
    raise ValueError(f"HF config must be a dict, got {type(hf_config)}.")
  model_type = hf_config.get("model_type")
  if model_type not in model_types:
    raise ValueError(
        f"HF config model_type={model_type!r} is not supported; expected one"
        f" of {sorted(model_types)}."
    )
  architectures = hf_config.get("architectures")
  if architectures is not None and architectures != [ARCHITECTURES[model_type]]:
    raise ValueError(
        f"HF config architectures={architectures!r} is not supported for"
        f" model_type {model_type!r}; expected"
        f" [{ARCHITECTURES[model_type]!r}]."
    )
  return model_type


def _attention(
    hf_config: dict[str, Any], default_head_dim: int | None
) -> dict[str, Any]:
  """Width, heads, head_dim, norm and tying fields of `ModelConfig`.

  Args:
    hf_config: the parsed `config.json`.
    default_head_dim: what transformers assumes when `head_dim` is absent
      (Qwen3: 128), or None for hidden_size // num_attention_heads (Qwen2).
  """
  embed_dim = _positive_int(hf_config, "hidden_size")
  num_heads = _positive_int(hf_config, "num_attention_heads")
  if hf_config.get("head_dim") is not None:
    head_dim = _positive_int(hf_config, "head_dim")
  else:
    head_dim = embed_dim // num_heads
    if embed_dim % num_heads or head_dim != (default_head_dim or head_dim):
      raise ValueError(
          "HF config is missing field 'head_dim' and hidden_size //"
          f" num_attention_heads = {head_dim} differs from Hugging Face's"
          f" default of {default_head_dim}; write head_dim explicitly."
      )
  if hf_config.get("num_key_value_heads") is None:
    # An explicit null means "same as num_attention_heads" in transformers.
    if "num_key_value_heads" not in hf_config:
      _field(hf_config, "num_key_value_heads")
    num_kv_heads = num_heads
  else:
    num_kv_heads = _positive_int(hf_config, "num_key_value_heads")
  if num_heads % num_kv_heads:
    raise ValueError(
        f"HF config num_attention_heads={num_heads} is not a multiple of"
        f" num_key_value_heads={num_kv_heads}."
    )
  norm_eps = hf_config.get("rms_norm_eps", 1e-6)
  if not isinstance(norm_eps, (int, float)) or norm_eps <= 0:
    raise ValueError(f"HF config rms_norm_eps={norm_eps!r} must be positive.")
  tied = hf_config.get("tie_word_embeddings", False)
  if not isinstance(tied, bool):
    raise ValueError(f"HF config tie_word_embeddings={tied!r} must be a bool.")
  return dict(
      num_layers=_positive_int(hf_config, "num_hidden_layers"),
      vocab_size=_positive_int(hf_config, "vocab_size"),
      embed_dim=embed_dim,
      num_heads=num_heads,
      head_dim=head_dim,
      num_kv_heads=num_kv_heads,
      norm_eps=float(norm_eps),
      use_tied_embedding=tied,
  )


def _dtypes(compute: Any, params: Any) -> dict[str, Any]:
  compute = check_dtype("dtype", jnp.float32 if compute is None else compute)
  return dict(
      dtype=compute,
      param_dtype=check_dtype(
          "param_dtype", compute if params is None else params
      ),
  )


def qwen3_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> qwen3_lib.ModelConfig:
  """Builds a Tunix Qwen3 `ModelConfig` from a Hugging Face `config.json`.

  Args:
    hf_config: The parsed `config.json` of a Qwen3 or Qwen3-MoE model.
    dtype: Compute dtype (float32, bfloat16 or float16); float32 if None.
      `torch_dtype` in the file is not used to choose it.
    param_dtype: Parameter dtype; `dtype` (or float32) if None.

  Returns:
    The equivalent `ModelConfig`, with `use_flash_attention=False` (the flash
    path ignores custom attention masks).

  Raises:
    ValueError: If a field is missing, or a setting (model type, RoPE
      variant, attention bias, sliding window, MoE routing, ...) is one the
      Tunix Qwen3 cannot represent. The message names the field.
  """
  model_type = _check_type(hf_config, ("qwen3", "qwen3_moe"))
  _check_fixed(hf_config, _FIXED_FIELDS + _FIXED_QWEN3_FIELDS, "Qwen3")
  rope_theta = _rope_theta(hf_config, "Qwen3", TUNIX_ROPE_THETA)
  # transformers' Qwen3Config defaults head_dim to 128.
  attention = _attention(hf_config, default_head_dim=128)

  num_experts = num_experts_per_tok = None
  if model_type == "qwen3_moe":
    if hf_config.get("num_experts") is None and "num_local_experts" in (
        hf_config
    ):
      # transformers>=5 writes `num_local_experts` for `num_experts`.
      hf_config = {**hf_config, "num_experts": hf_config["num_local_experts"]}
    num_experts = _positive_int(hf_config, "num_experts")
    num_experts_per_tok = _positive_int(hf_config, "num_experts_per_tok")
    hidden_dim = _positive_int(hf_config, "moe_intermediate_size")
    if num_experts_per_tok > num_experts:
      raise ValueError(
          f"HF config num_experts_per_tok={num_experts_per_tok} exceeds"
          f" num_experts={num_experts}."
      )
    _check_fixed(hf_config, _FIXED_MOE_FIELDS, "Qwen3")
  else:
    for key in _MOE_FIELDS + ("num_local_experts",):
      if hf_config.get(key):
        raise ValueError(
            f"HF config {key}={hf_config[key]!r} is an MoE field, but"
            " model_type is 'qwen3'; use model_type 'qwen3_moe'."
        )
    hidden_dim = _positive_int(hf_config, "intermediate_size")
  return qwen3_lib.ModelConfig(
      **attention,
      hidden_dim=hidden_dim,
      rope_theta=rope_theta,
      num_experts=num_experts,
      num_experts_per_tok=num_experts_per_tok,
      **_dtypes(dtype, param_dtype),
      use_flash_attention=False,
  )


def qwen2_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> qwen2_lib.ModelConfig:
  """Builds a Tunix Qwen2 `ModelConfig` from a Hugging Face `config.json`.

  Qwen2 (and Qwen2.5) has q/k/v projection biases, as Tunix's Qwen2 does,
  and its attention applies the config's `rope_theta`. A sliding window is
  refused only when it is on (`use_sliding_window`, or a `sliding_attention`
  layer): real Qwen2.5 configs carry a `sliding_window` size that
  transformers ignores while it is off.

  Args and Raises: as `qwen3_config_from_hf`.
  """
  _check_type(hf_config, ("qwen2",))
  _check_fixed(hf_config, _FIXED_FIELDS, "Qwen2")
  rope_theta = _rope_theta(
      hf_config, "Qwen2", compat.ROPE_THETA_APPLIED["qwen2"]
  )
  return qwen2_lib.ModelConfig(
      **_attention(hf_config, default_head_dim=None),
      hidden_dim=_positive_int(hf_config, "intermediate_size"),
      rope_theta=rope_theta,
      **_dtypes(dtype, param_dtype),
      use_flash_attention=False,
  )


def model_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> Any:
  """The Tunix `ModelConfig` of a Qwen3, Qwen3-MoE or Qwen2 `config.json`.

  Args and Raises: as `qwen3_config_from_hf`; the family is `model_type`'s.
  """
  model_type = _check_type(hf_config, tuple(ARCHITECTURES))
  parse = (
      qwen2_config_from_hf if model_type == "qwen2" else (qwen3_config_from_hf)
  )
  return parse(hf_config, dtype=dtype, param_dtype=param_dtype)


def _common_to_hf(config: Any, model_type: str) -> dict[str, Any]:
  return {
      "architectures": [ARCHITECTURES[model_type]],
      "model_type": model_type,
      "vocab_size": config.vocab_size,
      "hidden_size": config.embed_dim,
      "num_hidden_layers": config.num_layers,
      "num_attention_heads": config.num_heads,
      "num_key_value_heads": config.num_kv_heads,
      "head_dim": config.head_dim,
      "hidden_act": "silu",
      "rms_norm_eps": float(config.norm_eps),
      "rope_theta": config.rope_theta,
      "rope_scaling": None,
      "tie_word_embeddings": bool(config.use_tied_embedding),
      "attention_dropout": 0.0,
      "use_sliding_window": False,
      "sliding_window": None,
      "dtype": jnp.dtype(check_dtype("param_dtype", config.param_dtype)).name,
  }


def _add_extra(
    hf_config: dict[str, Any], extra: dict[str, Any] | None
) -> dict[str, Any]:
  for key, value in (extra or {}).items():
    if key in hf_config:
      raise ValueError(
          f"extra key {key!r} would override a field derived from ModelConfig."
      )
    hf_config[key] = value
  return hf_config


def qwen3_config_to_hf(
    config: qwen3_lib.ModelConfig, *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
  """Builds a Hugging Face `config.json` dict from a Tunix Qwen3 config.

  Args:
    config: The Tunix model config.
    extra: Additional keys (e.g. `max_position_embeddings`, `bos_token_id`,
      `eos_token_id`, `pad_token_id`). They may not override a key derived
      from `config`.

  Returns:
    A dict that transformers loads as `Qwen3Config` (or `Qwen3MoeConfig`).

  Raises:
    ValueError: If `config` cannot be described faithfully (its RoPE theta
      is not the one Tunix applies, or its dtype is unsupported), or if
      `extra` overrides a derived key.
  """
  if config.rope_theta != TUNIX_ROPE_THETA:
    raise ValueError(
        f"ModelConfig.rope_theta={config.rope_theta!r} cannot be exported:"
        f" Tunix Qwen3 applies RoPE with theta {TUNIX_ROPE_THETA} whatever"
        " the config says, so config.json would describe another model."
    )
  moe = config.num_experts is not None
  hf_config = _common_to_hf(config, "qwen3_moe" if moe else "qwen3")
  hf_config["attention_bias"] = False
  if moe:
    hf_config.update({
        "num_experts": config.num_experts,
        "num_experts_per_tok": config.num_experts_per_tok,
        "moe_intermediate_size": config.hidden_dim,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    })
  else:
    hf_config["intermediate_size"] = config.hidden_dim
  return _add_extra(hf_config, extra)


def qwen2_config_to_hf(
    config: qwen2_lib.ModelConfig, *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
  """Builds a Hugging Face `config.json` dict from a Tunix Qwen2 config.

  Args and Raises: as `qwen3_config_to_hf`; the dict loads as
  `Qwen2Config` (`head_dim` is written, which transformers' Qwen2 reads).
  """
  hf_config = _common_to_hf(config, "qwen2")
  hf_config["intermediate_size"] = config.hidden_dim
  return _add_extra(hf_config, extra)


def config_to_hf(
    config: Any, *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
  """`config.json` of a Tunix Qwen3 or Qwen2 config; as `qwen3_config_to_hf`.

  Raises:
    ValueError: as `qwen3_config_to_hf`, or for another config class.
  """
  if isinstance(config, qwen3_lib.ModelConfig):
    return qwen3_config_to_hf(config, extra=extra)
  if isinstance(config, qwen2_lib.ModelConfig):
    return qwen2_config_to_hf(config, extra=extra)
  raise ValueError(
      f"{type(config).__module__}.{type(config).__name__} has no Hugging Face"
      " export; supported: Tunix Qwen3 and Qwen2."
  )
