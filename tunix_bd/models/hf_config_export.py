# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tunix's Qwen3 and Qwen2 configs to a Hugging Face `config.json`.

The inverse of `hf_config`: `config_to_hf` picks the family from the config
class and writes every field `hf_config` reads, refusing a config that
`config.json` would describe as another model (a RoPE theta Tunix does not
apply, an unsupported dtype).
"""

from typing import Any

import jax.numpy as jnp
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd.models import hf_config_fields as fields_lib


def _common_to_hf(config: Any, model_type: str) -> dict[str, Any]:
  return {
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
  if config.rope_theta != fields_lib.TUNIX_ROPE_THETA:
    raise ValueError(
        f"ModelConfig.rope_theta={config.rope_theta!r} cannot be exported:"
        f" Tunix Qwen3 applies RoPE with theta {fields_lib.TUNIX_ROPE_THETA}"
        " whatever the config says, so config.json would describe another"
        " model."
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
