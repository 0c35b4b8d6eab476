# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark decoding: Tunix AR Sampler vs block diffusion (cache-free, cached).

After `quickstart.py` (or `ar_pretrain.py` then `sft.py`):

  tunix run --plugin tunix_bd bench_decode.py

Prints, for batch sizes 1 and 32 and generation budgets 16 and 256 tokens,
tokens/s and its ratio to AR, tokens per forward and exact match of each
method, all measured in one run with the methods interleaved; then the time
of a vectorized trace replay over the time of the rollout it replays.
Variants: `default`; `tiny` for smoke tests.
"""

import ml_collections

from tunix_bd import config_sections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "tiny"):
    raise ValueError(
        f"unknown bench_decode variant {variant!r}; use 'default' or 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_decode"
  config.ar_checkpoint = "runs/quickstart/ar_pretrain/export"
  config.bd_checkpoint = "runs/quickstart/sft/export"
  config.tasks = ("sort", "reverse", "double")
  config.num_prompts = 64
  config.batch_sizes = (1, 32)
  config.max_new_tokens = (16, 256)
  config.output = ""  # A path to also write the report as JSON.
  config.mesh = config_sections.mesh()
  if variant == "tiny":
    config.num_prompts = 4
    config.batch_sizes = (1, 2)
    config.max_new_tokens = (8, 16)
  return config
