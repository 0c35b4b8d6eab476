# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face `config.json` to Tunix's Qwen3 and Qwen2 configs, and back.

Tunix parses no `config.json`: its presets are hand-written. This module maps
every field that changes the model's math and rejects, naming the field, any
setting the Tunix model cannot represent (RoPE scaling, biases, sliding
windows...; `hf_config_fields`), so a checkpoint never runs silently as a
different model. `model_config_from_hf` picks the family from `model_type`
(`qwen3`, `qwen3_moe`, `qwen2`); `config_to_hf` is the way back.
"""

from typing import Any

import jax.numpy as jnp
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd import compat
from tunix_bd.models import hf_config_fields as fields_lib


def model_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> Any:
  """The Tunix `ModelConfig` of a Qwen3, Qwen3-MoE or Qwen2 `config.json`.

  Qwen2 (and Qwen2.5) has q/k/v projection biases, as Tunix's Qwen2 does,
  and its attention applies the config's `rope_theta`. A sliding window is
  refused only when it is on (`use_sliding_window`, or a `sliding_attention`
  layer): real Qwen2.5 configs carry a `sliding_window` size that
  transformers ignores while it is off.

  Args:
    hf_config: The parsed `config.json`; the family is its `model_type`'s.
    dtype: Compute dtype (float32, bfloat16 or float16); float32 if None.
      `torch_dtype` in the file is not used to choose it.
    param_dtype: Parameter dtype; `dtype` (or float32) if None.

  Returns:
    The equivalent `ModelConfig`, with `use_flash_attention=False` (the flash
    path ignores custom attention masks).

  Raises:
    ValueError: If a field is missing, or a setting (model type, RoPE
      variant, attention bias, sliding window, MoE routing, ...) is one the
      Tunix model cannot represent. The message names the field.
  """
  model_type = fields_lib.check_type(hf_config, tuple(fields_lib.ARCHITECTURES))
  qwen2 = model_type == "qwen2"
  label = "Qwen2" if qwen2 else "Qwen3"
  fixed = fields_lib.FIXED_FIELDS
  fields_lib.check_fixed(
      hf_config,
      fixed if qwen2 else fixed + fields_lib.FIXED_QWEN3_FIELDS,
      label,
  )
  rope_theta = fields_lib.rope_theta(
      hf_config, label, compat.ROPE_THETA_APPLIED["qwen2" if qwen2 else "qwen3"]
  )
  # transformers' Qwen3Config defaults head_dim to 128.
  attention = fields_lib.attention_fields(
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
        key: fields_lib.positive_int(hf_config, key)
        for key in ("num_experts", "num_experts_per_tok")
    }
    hidden_dim = fields_lib.positive_int(hf_config, "moe_intermediate_size")
    if moe["num_experts_per_tok"] > moe["num_experts"]:
      raise ValueError(
          f"HF config num_experts_per_tok={moe['num_experts_per_tok']} exceeds"
          f" num_experts={moe['num_experts']}."
      )
    fields_lib.check_fixed(hf_config, fields_lib.FIXED_MOE_FIELDS, "Qwen3")
  else:
    for key in () if qwen2 else fields_lib.MOE_FIELDS + ("num_local_experts",):
      if hf_config.get(key):
        raise ValueError(
            f"HF config {key}={hf_config[key]!r} is an MoE field, but"
            " model_type is 'qwen3'; use model_type 'qwen3_moe'."
        )
    hidden_dim = fields_lib.positive_int(hf_config, "intermediate_size")
  config_class = qwen2_lib.ModelConfig if qwen2 else qwen3_lib.ModelConfig
  return config_class(
      **attention,
      hidden_dim=hidden_dim,
      rope_theta=rope_theta,
      **moe,
      **fields_lib.dtype_fields(dtype, param_dtype),
      use_flash_attention=False,
  )


def config_to_hf(config: Any) -> dict[str, Any]:
  """The `config.json` of a Tunix Qwen3 or Qwen2 config.

  Writes every field `model_config_from_hf` reads; it loads in transformers
  as `Qwen3Config`, `Qwen3MoeConfig` or `Qwen2Config` (`head_dim` is
  written, which transformers' Qwen2 reads).

  Raises:
    ValueError: for another config class, or one `config.json` would
      describe as another model: a RoPE theta Tunix does not apply, an
      unsupported dtype.
  """
  if isinstance(config, qwen3_lib.ModelConfig):
    if config.rope_theta != fields_lib.TUNIX_ROPE_THETA:
      raise ValueError(
          f"ModelConfig.rope_theta={config.rope_theta!r} cannot be exported:"
          f" Tunix Qwen3 applies RoPE with theta {fields_lib.TUNIX_ROPE_THETA}"
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
      "architectures": [fields_lib.ARCHITECTURES[model_type]],
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
      "dtype": (
          jnp.dtype(
              fields_lib.check_dtype("param_dtype", config.param_dtype)
          ).name
      ),
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
