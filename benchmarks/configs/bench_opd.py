# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Continued SFT vs OPD `corrupted` vs OPD `trace`, equal wall time.

  python -m benchmarks bench_opd.py

(after the quickstart, whose converted model and AR teacher are the
defaults; `--config.model.student=DIR --config.model.teacher=DIR` for
others).

From the same block-diffusion student, each arm trains for
`bench.time_budget_s` seconds (compilation included) with the same optimizer
settings (the `opd.py` / `sft.py` configs otherwise), then all are decoded
greedily on the same held-out prompts: exact match and tokens per forward at
each threshold, side by side. Variants: `default`; `tiny` for smoke tests.
"""

import ml_collections

from benchmarks import equal_time
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
  # Each section takes its defaults from its settings dataclass
  # (`benchmarks.equal_time`); this config states what it changes.
  # model: the student every arm starts from and the AR teacher.
  config.model = config_utils.to_section(equal_time.EqualTimeModelSettings)
  # bench: every arm's time budget and optimizer settings (`max_steps` sets
  # the learning-rate schedule's length), the OPD arms' rollout commit
  # threshold and hard-label weight, and the held-out evaluation.
  config.bench = config_utils.to_section(equal_time.EqualTimeSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "tiny":
    config.bench.update(time_budget_s=5.0, num_eval=8)
  return config
