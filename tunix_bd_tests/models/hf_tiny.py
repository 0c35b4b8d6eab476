# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A tiny Qwen3 as a Hugging Face `config.json` and as a Tunix config.

Shared by the tests of `hf_checkpoint` and `hf_config`;
`qwen2_hf_config` is the Qwen2 fixture's `config.json` (testdata/hf).
"""

import json
import os

from tunix.models.qwen3 import model as qwen3_lib

LAYERS, VOCAB, EMBED, HIDDEN, HEADS, HEAD_DIM = 2, 128, 64, 128, 2, 32


def qwen3_hf_config(tied: bool, kv_heads: int) -> dict:
  """The tiny Qwen3's `config.json`, as transformers writes it."""
  return {
      "architectures": ["Qwen3ForCausalLM"],
      "model_type": "qwen3",
      "vocab_size": VOCAB,
      "hidden_size": EMBED,
      "intermediate_size": HIDDEN,
      "num_hidden_layers": LAYERS,
      "num_attention_heads": HEADS,
      "num_key_value_heads": kv_heads,
      "head_dim": HEAD_DIM,
      "hidden_act": "silu",
      "rms_norm_eps": 1e-6,
      "rope_theta": 1000000.0,
      "rope_scaling": None,
      "tie_word_embeddings": tied,
      "torch_dtype": "float32",
      "max_position_embeddings": 512,
  }


def qwen3_config(**overrides) -> qwen3_lib.ModelConfig:
  """The tiny Qwen3's Tunix config (one KV head), with `overrides`."""
  kwargs = dict(
      num_layers=LAYERS,
      vocab_size=VOCAB,
      embed_dim=EMBED,
      hidden_dim=HIDDEN,
      num_heads=HEADS,
      head_dim=HEAD_DIM,
      num_kv_heads=1,
      rope_theta=1_000_000,
      norm_eps=1e-6,
  )
  kwargs.update(overrides)
  return qwen3_lib.ModelConfig(**kwargs)


def qwen2_hf_config(**changes) -> dict:
  """testdata/hf/qwen2_untied's `config.json`, with `changes`."""
  path = os.path.join(
      os.path.dirname(os.path.dirname(__file__)),
      "testdata",
      "hf",
      "qwen2_untied",
      "config.json",
  )
  with open(path) as f:
    return {**json.load(f), **changes}
