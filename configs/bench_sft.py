# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark SFT step throughput: AR vs single-canvas vs clean-context.

  tunix run --plugin tunix_bd bench_sft.py

Prints tokens/s, the ratio to plain AR SFT and XLA's peak-memory estimate of
each step, measured side by side (interleaved) in one run on the embedded
model and task. Variants: `default`; `tiny` for smoke tests.
"""

import ml_collections

from tunix_bd import config_sections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "tiny"):
    raise ValueError(
        f"unknown bench_sft variant {variant!r}; use 'default' or 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_sft"
  config.seed = 0
  config.batch_size = 32
  config.num_steps = 20
  # Two: the first update changes the optimizer state's types and recompiles.
  config.warmup_steps = 2
  config.output = ""  # A path to also write the report as JSON.
  config.model = config_sections.embedded_model()
  config.bd = ml_collections.ConfigDict(dict(block_size=8))
  config.data = config_sections.embedded_data(
      num_train=256, num_eval=8, max_length=56
  )
  config.mesh = config_sections.mesh()
  if variant == "tiny":
    config.batch_size = 4
    config.num_steps = 2
    config.data.num_train = 16
  return config
