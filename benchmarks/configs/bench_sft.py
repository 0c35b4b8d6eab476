# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark SFT step throughput: AR vs single-canvas vs clean-context.

  python -m benchmarks bench_sft.py

Prints tokens/s, the ratio to plain AR SFT and XLA's peak-memory estimate of
each step (beside `memory_plan.sft_step_plan`'s), measured side by side
(interleaved) in one run on the embedded model and task, with the share of
real tokens in the batch (packed as SFT packs it; `--config.data.packing=False`
for one example a row), MFU on all and on real tokens, and compile seconds. Variants:
`default`; `qwen3_0p6b`, a random model of Qwen3-0.6B's widths and
vocabulary with 4 of its 28 layers (`--config.model.num_layers=28` for the
whole shape); `tiny` for smoke tests. The dense loss of earlier versions:
`--config.model.logits_chunk=0`; bf16 compute: `--config.model.dtype=bfloat16`.
"""

import ml_collections

from benchmarks import sft_step_settings
from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.models import sections

_VARIANTS = ("default", "qwen3_0p6b", "tiny")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown bench_sft variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_sft"
  config.seed = 0
  config.output = ""  # A path to also write the report as JSON.
  # Each section takes its defaults from its settings dataclass
  # (`benchmarks.sft_step_settings`); this config states what it changes.
  # model: the random Qwen3's shape, `vocab_size` (0: the tokenizer's; more:
  # a real model's, unused ids) and the SFT recipe's precision keys.
  config.model = config_utils.to_section(sft_step_settings.SftStepModelSettings)
  config.bd = config_utils.to_section(sections.BlockSize)
  # data.packing: SFT's packed rows (on); the report's `real_token_share`.
  config.data = config_utils.to_section(
      data_settings.SftData,
      num_train=256,
      num_eval=8,
      max_length=56,
  )
  # bench.variants: among `ar` (always), `bd_single_canvas`,
  # `bd_clean_context`.
  config.bench = config_utils.to_section(sft_step_settings.SftStepSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "qwen3_0p6b":
    # Qwen3-0.6B's config.json, 4 layers.
    config.model.update(
        num_layers=4,
        embed_dim=1024,
        hidden_dim=3072,
        num_heads=16,
        head_dim=128,
        num_kv_heads=8,
        tie_embeddings=True,
        vocab_size=151936,
    )
    config.bench.update(
        batch_size=2, num_steps=3, variants=("ar", "bd_clean_context")
    )
    config.data.update(num_train=16, max_length=128)
  if variant == "tiny":
    config.bench.update(batch_size=4, num_steps=2)
    config.data.num_train = 16
  return config
