# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face `config.json` to Tunix's Qwen3 and Qwen2 configs.

Tunix parses no `config.json`: its presets are hand-written. This module maps
every field that changes the model's math and rejects, naming the field, any
setting the Tunix model cannot represent (RoPE scaling, biases, sliding
windows...; `hf_config_fields`), so a checkpoint never runs silently as a
different model. `model_config_from_hf` picks the family from `model_type`
(`qwen3`, `qwen3_moe`, `qwen2`); `hf_config_export` is the way back.
"""

from typing import Any

from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd import compat
from tunix_bd.models import hf_config_fields as fields_lib


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
  model_type = fields_lib.check_type(hf_config, ("qwen3", "qwen3_moe"))
  fields_lib.check_fixed(
      hf_config,
      fields_lib.FIXED_FIELDS + fields_lib.FIXED_QWEN3_FIELDS,
      "Qwen3",
  )
  rope_theta = fields_lib.rope_theta(
      hf_config, "Qwen3", fields_lib.TUNIX_ROPE_THETA
  )
  # transformers' Qwen3Config defaults head_dim to 128.
  attention = fields_lib.attention_fields(hf_config, default_head_dim=128)

  num_experts = num_experts_per_tok = None
  if model_type == "qwen3_moe":
    if hf_config.get("num_experts") is None and "num_local_experts" in (
        hf_config
    ):
      # transformers>=5 writes `num_local_experts` for `num_experts`.
      hf_config = {**hf_config, "num_experts": hf_config["num_local_experts"]}
    num_experts = fields_lib.positive_int(hf_config, "num_experts")
    num_experts_per_tok = fields_lib.positive_int(
        hf_config, "num_experts_per_tok"
    )
    hidden_dim = fields_lib.positive_int(hf_config, "moe_intermediate_size")
    if num_experts_per_tok > num_experts:
      raise ValueError(
          f"HF config num_experts_per_tok={num_experts_per_tok} exceeds"
          f" num_experts={num_experts}."
      )
    fields_lib.check_fixed(hf_config, fields_lib.FIXED_MOE_FIELDS, "Qwen3")
  else:
    for key in fields_lib.MOE_FIELDS + ("num_local_experts",):
      if hf_config.get(key):
        raise ValueError(
            f"HF config {key}={hf_config[key]!r} is an MoE field, but"
            " model_type is 'qwen3'; use model_type 'qwen3_moe'."
        )
    hidden_dim = fields_lib.positive_int(hf_config, "intermediate_size")
  return qwen3_lib.ModelConfig(
      **attention,
      hidden_dim=hidden_dim,
      rope_theta=rope_theta,
      num_experts=num_experts,
      num_experts_per_tok=num_experts_per_tok,
      **fields_lib.dtype_fields(dtype, param_dtype),
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
  fields_lib.check_type(hf_config, ("qwen2",))
  fields_lib.check_fixed(hf_config, fields_lib.FIXED_FIELDS, "Qwen2")
  rope_theta = fields_lib.rope_theta(
      hf_config, "Qwen2", compat.ROPE_THETA_APPLIED["qwen2"]
  )
  return qwen2_lib.ModelConfig(
      **fields_lib.attention_fields(hf_config, default_head_dim=None),
      hidden_dim=fields_lib.positive_int(hf_config, "intermediate_size"),
      rope_theta=rope_theta,
      **fields_lib.dtype_fields(dtype, param_dtype),
      use_flash_attention=False,
  )


def model_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> Any:
  """The Tunix `ModelConfig` of a Qwen3, Qwen3-MoE or Qwen2 `config.json`.

  Args and Raises: as `qwen3_config_from_hf`; the family is `model_type`'s.
  """
  model_type = fields_lib.check_type(hf_config, tuple(fields_lib.ARCHITECTURES))
  parse = (
      qwen2_config_from_hf if model_type == "qwen2" else (qwen3_config_from_hf)
  )
  return parse(hf_config, dtype=dtype, param_dtype=param_dtype)
