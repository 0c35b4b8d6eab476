# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face `config.json` to Tunix's Qwen3 and Qwen2 configs, and back.

Tunix parses no `config.json`. `model_config_from_hf` maps every field that
changes the model's math (the family from `model_type`; a `llama` runs as
Qwen2) and refuses, naming the field, a malformed value or a setting the
Tunix model lacks (`FIXED_FIELDS`), so a checkpoint never runs silently as
another model. `config_to_hf` is the way back.
"""

from typing import Any

import jax.numpy as jnp
import numpy as np
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
    "llama": "LlamaForCausalLM",
}
# A Llama runs as Tunix's Qwen2 with zero q/k/v biases: the layers are the
# same math but for those biases, and Tunix's Qwen2 rotates with the
# config's theta where its Llama 3 always uses 1e6
# (`compat.ROPE_THETA_APPLIED`). Its export is that Qwen2 (`llama_as_qwen2`).
LLAMA = "llama"
# Llama fields Qwen2's config lacks; `llama_as_qwen2` drops them (both are
# refused unless false; transformers 5 no longer reads `pretraining_tp`).
_LLAMA_ONLY_FIELDS = ("attention_bias", "mlp_bias", "pretraining_tp")
# The weight dtypes tunix_bd reads from and writes to `config.json`.
DTYPES = ("float32", "bfloat16", "float16")


def positive_int(hf_config: dict[str, Any], key: str) -> int:
  """`hf_config[key]` if it is a positive integer (not a bool)."""
  value = hf_config.get(key)
  if value is None:
    raise ValueError(f"HF config is missing required field {key!r}.")
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f"HF config {key}={value!r} must be a positive integer.")
  return value


def check_dtype(name: str, value: Any) -> Any:
  """`value` as a JAX dtype; a ValueError naming the setting `name` for
  anything but float32, bfloat16 and float16."""
  try:
    key = jnp.dtype(value).name
  except TypeError as e:
    raise ValueError(f"{name}={value!r} is not a dtype.") from e
  if key not in DTYPES:
    raise ValueError(f"{name}={value!r} is not one of {sorted(DTYPES)}.")
  return getattr(jnp, key)


def rope_theta(hf_config: dict[str, Any], family: str, label: str) -> Any:
  """The RoPE base, checked to be one the Tunix `family` (`label`)
  implements and rotates with (`compat.ROPE_THETA_APPLIED`)."""
  applied = compat.ROPE_THETA_APPLIED[family]
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
          " implements the default RoPE (no scaling)."
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
        f" always applies RoPE with theta {applied} (its attention ignores"
        " ModelConfig.rope_theta), so this checkpoint would run as another"
        f" model; only rope_theta={applied} loads exactly."
    )
  if theta <= 0:
    raise ValueError(f"HF config rope_theta={theta!r} must be positive.")
  return int(theta) if float(theta).is_integer() else float(theta)


# Settings that change the math but the Tunix models lack:
# (field, transformers' default, accepted(value), what Tunix does). Qwen2.5
# configs carry a `sliding_window` size, ignored while the window is off.
FIXED_FIELDS = (
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
FIXED_QWEN3_FIELDS = (
    ("attention_bias", False, lambda v: not v, "it has no attention bias"),
    ("mlp_bias", False, lambda v: not v, "it has no MLP bias"),
)
# Llama's `attention_bias` also puts a bias on o_proj, which Qwen2 lacks.
FIXED_LLAMA_FIELDS = (
    ("attention_bias", False, lambda v: not v, "it has no o_proj bias"),
    ("mlp_bias", False, lambda v: not v, "it has no MLP bias"),
)
FIXED_MOE_FIELDS = (
    # Hugging Face defaults norm_topk_prob to false.
    ("norm_topk_prob", False, lambda v: v is True, "it renormalizes top-k"),
    ("decoder_sparse_step", 1, lambda v: v == 1, "every layer is MoE"),
    ("mlp_only_layers", None, lambda v: not v, "every layer is MoE"),
    ("shared_expert_intermediate_size", 0, lambda v: not v, "no shared expert"),
)


def check_fixed(
    hf_config: dict[str, Any], fields: tuple[Any, ...], label: str
) -> None:
  """Refuses, naming the field, a setting of `fields` Tunix `label` lacks."""
  for key, default, accepted, reason in fields:
    value = hf_config.get(key, default)
    if not accepted(value):
      raise ValueError(
          f"HF config {key}={value!r} is not supported by Tunix {label}:"
          f" {reason}."
      )


def attention_fields(
    hf_config: dict[str, Any], default_head_dim: int | None
) -> dict[str, Any]:
  """Width, heads, head_dim, norm and tying fields of `ModelConfig`;
  `default_head_dim` is transformers' for an absent `head_dim` (Qwen3: 128;
  None: hidden_size // num_attention_heads)."""
  embed_dim = positive_int(hf_config, "hidden_size")
  num_heads = positive_int(hf_config, "num_attention_heads")
  if hf_config.get("head_dim") is not None:
    head_dim = positive_int(hf_config, "head_dim")
  else:
    head_dim = embed_dim // num_heads
    if embed_dim % num_heads or head_dim != (default_head_dim or head_dim):
      raise ValueError(
          "HF config is missing field 'head_dim' and hidden_size //"
          f" num_attention_heads = {head_dim} differs from Hugging Face's"
          f" default of {default_head_dim}; write head_dim explicitly."
      )
  # An explicit null means "same as num_attention_heads" in transformers; a
  # missing field is refused (`positive_int`).
  if hf_config.get("num_key_value_heads", 0) is None:
    num_kv_heads = num_heads
  else:
    num_kv_heads = positive_int(hf_config, "num_key_value_heads")
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
      num_layers=positive_int(hf_config, "num_hidden_layers"),
      vocab_size=positive_int(hf_config, "vocab_size"),
      embed_dim=embed_dim,
      num_heads=num_heads,
      head_dim=head_dim,
      num_kv_heads=num_kv_heads,
      norm_eps=float(norm_eps),
      use_tied_embedding=tied,
  )


def model_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> Any:
  """The Tunix `ModelConfig` of a Qwen3, Qwen3-MoE, Qwen2 or Llama
  `config.json` (refusals: docs/design.md "Hugging Face checkpoints in and
  out"). `dtype` is the compute dtype (float32 if None; not the file's),
  `param_dtype` defaults to it; no flash attention (it ignores custom
  attention masks)."""
  if not isinstance(hf_config, dict):
    raise ValueError(f"HF config must be a dict, got {type(hf_config)}.")
  model_type = hf_config.get("model_type")
  if model_type not in ARCHITECTURES:
    raise ValueError(
        f"HF config model_type={model_type!r} is not supported; expected one"
        f" of {sorted(ARCHITECTURES)}."
    )
  architectures = hf_config.get("architectures")
  if architectures is not None and architectures != [ARCHITECTURES[model_type]]:
    raise ValueError(
        f"HF config architectures={architectures!r} is not supported for"
        f" model_type {model_type!r}; expected"
        f" [{ARCHITECTURES[model_type]!r}]."
    )
  qwen2 = model_type in ("qwen2", LLAMA)
  label = {"qwen2": "Qwen2", LLAMA: "Llama (as Qwen2)"}.get(model_type, "Qwen3")
  fixed = {"qwen2": (), LLAMA: FIXED_LLAMA_FIELDS}.get(
      model_type, FIXED_QWEN3_FIELDS
  )
  check_fixed(hf_config, FIXED_FIELDS + fixed, label)
  theta = rope_theta(hf_config, "qwen2" if qwen2 else "qwen3", label)
  # transformers' Qwen3Config defaults head_dim to 128 (Qwen2's and Llama's
  # to hidden_size // num_attention_heads).
  attention = attention_fields(
      hf_config, default_head_dim=None if qwen2 else 128
  )

  moe = {}
  if model_type == "qwen3_moe":
    if hf_config.get("num_experts") is None and "num_local_experts" in (
        hf_config
    ):
      # transformers>=5 writes `num_local_experts` for `num_experts`.
      hf_config = {**hf_config, "num_experts": hf_config["num_local_experts"]}
    moe = {
        key: positive_int(hf_config, key)
        for key in ("num_experts", "num_experts_per_tok")
    }
    hidden_dim = positive_int(hf_config, "moe_intermediate_size")
    if moe["num_experts_per_tok"] > moe["num_experts"]:
      raise ValueError(
          f"HF config num_experts_per_tok={moe['num_experts_per_tok']} exceeds"
          f" num_experts={moe['num_experts']}."
      )
    check_fixed(hf_config, FIXED_MOE_FIELDS, "Qwen3")
  else:
    moe_fields = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
    for key in () if qwen2 else moe_fields + ("num_local_experts",):
      if hf_config.get(key):
        raise ValueError(
            f"HF config {key}={hf_config[key]!r} is an MoE field, but"
            " model_type is 'qwen3'; use model_type 'qwen3_moe'."
        )
    hidden_dim = positive_int(hf_config, "intermediate_size")
  dtype = check_dtype("dtype", jnp.float32 if dtype is None else dtype)
  param_dtype = dtype if param_dtype is None else param_dtype
  config_class = qwen2_lib.ModelConfig if qwen2 else qwen3_lib.ModelConfig
  return config_class(
      **attention,
      hidden_dim=hidden_dim,
      rope_theta=theta,
      **moe,
      dtype=dtype,
      param_dtype=check_dtype("param_dtype", param_dtype),
      use_flash_attention=False,
  )


def llama_as_qwen2(hf_config: dict[str, Any]) -> dict[str, Any]:
  """The Qwen2 `config.json` of the model a Llama one loads as (`LLAMA`):
  the same fields but the Llama-only ones, Qwen2's type and architecture."""
  out = {k: v for k, v in hf_config.items() if k not in _LLAMA_ONLY_FIELDS}
  out.update(model_type="qwen2", architectures=[ARCHITECTURES["qwen2"]])
  return out


def llama_biases(config: Any) -> dict[str, Any]:
  """The zero q/k/v biases of the Qwen2 `config` a Llama loads as, by
  Tunix parameter path (`layers.N.attn.q_bias`), in `param_dtype`."""
  kv = config.num_kv_heads * config.head_dim
  widths = {"q": config.num_heads * config.head_dim, "k": kv, "v": kv}
  return {
      f"layers.{i}.attn.{name}_bias": np.zeros(width, config.param_dtype)
      for i in range(config.num_layers)
      for name, width in widths.items()
  }


def config_to_hf(config: Any) -> dict[str, Any]:
  """The `config.json` of a Tunix Qwen3 or Qwen2 config (every field
  `model_config_from_hf` reads); a ValueError for one it would describe as
  another model (a RoPE theta Tunix does not apply, a dtype)."""
  if isinstance(config, qwen3_lib.ModelConfig):
    if config.rope_theta != TUNIX_ROPE_THETA:
      raise ValueError(
          f"ModelConfig.rope_theta={config.rope_theta!r} cannot be exported:"
          f" Tunix Qwen3 applies RoPE with theta {TUNIX_ROPE_THETA}"
          " whatever the config says, so config.json would describe another"
          " model."
      )
    moe = config.num_experts is not None
    model_type = "qwen3_moe" if moe else "qwen3"
  elif isinstance(config, qwen2_lib.ModelConfig):
    moe, model_type = False, "qwen2"
  else:
    raise ValueError(
        f"{type(config).__module__}.{type(config).__name__} has no Hugging"
        " Face export; supported: Tunix Qwen3 and Qwen2."
    )
  hf_config = {
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
  if model_type != "qwen2":
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
  return hf_config
