# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Continued SFT vs OPD `corrupted` vs OPD `trace`, equal wall time.

  tunix run --plugin tunix_bd bench_opd.py

(after the quickstart, whose converted model and AR teacher are the
defaults; `--config.student=DIR --config.teacher=DIR` for others).

From the same block-diffusion student, each arm trains for
`time_budget_s` seconds (compilation included) with the same optimizer
settings (the `opd.py` / `sft.py` configs otherwise), then all are decoded
greedily on the same held-out prompts: exact match and tokens per forward at
each threshold, side by side. Variants: `default`; `tiny` for smoke tests.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "tiny"):
    raise ValueError(
        f"unknown bench_opd variant {variant!r}; use 'default' or 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_opd"
  config.workdir = "runs/bench_opd"
  config.seed = 0
  config.student = "runs/quickstart/sft/export"
  config.teacher = "runs/quickstart/ar_pretrain/export"
  config.time_budget_s = 180.0
  config.max_steps = 2000  # Sets the learning-rate schedule's length.
  config.learning_rate = 3e-4
  config.warmup_steps = 10
  config.batch_size = 16
  # The OPD arms' rollout commit threshold and hard-label weight.
  config.rollout_threshold = 0.9
  config.hard_loss_weight = 0.0
  config.num_eval = 256
  config.thresholds = (0.5, 0.9)
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "tiny":
    config.time_budget_s = 5.0
    config.num_eval = 8
  return config
