# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark decoding: Tunix AR Sampler vs block diffusion (cache-free, cached).

After `quickstart.py` and `quickstart.py:long` (which train the models of the
two workloads):

  tunix run --plugin tunix_bd bench_decode.py

Workloads: `short`, the default digit tasks with a 16-token budget, on the
`quickstart.py` models; `long`, the `count` task (199 to 254 answer
characters) with a 256-token budget, on the `quickstart.py:long` models.
For each workload and batch size (1 and 32) it prints tokens/s and its ratio
to AR, tokens per forward and greedy exact match of each method, measured in
one run with the methods interleaved; then the time of a packed trace
replay over the time of the rollout it replays. One workload:
`--config.workloads=long`.

Variants: `default`; `tiny` for smoke tests (the short workload, tiny sizes).
"""

import ml_collections

from tunix_bd import config_sections


def _workload(tasks, max_new_tokens, runs):
  return dict(
      tasks=tasks,
      max_new_tokens=max_new_tokens,
      ar_checkpoint=f"{runs}/ar_pretrain/export",
      bd_checkpoint=f"{runs}/sft/export",
  )


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "tiny"):
    raise ValueError(
        f"unknown bench_decode variant {variant!r}; use 'default' or 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_decode"
  # Which of `workload_settings` to run, in order.
  config.workloads = ("short", "long")
  config.workload_settings = ml_collections.ConfigDict(
      dict(
          short=_workload(("sort", "reverse", "double"), 16, "runs/quickstart"),
          long=_workload(("count",), 256, "runs/quickstart_long"),
      )
  )
  config.num_prompts = 64
  config.batch_sizes = (1, 32)
  config.threshold = 0.9  # Of the `threshold` commit rule.
  # Passes over all batches; each batch counts its fastest (1: one pass).
  config.repeats = 1
  config.output = ""  # A path to also write the report as JSON.
  config.mesh = config_sections.mesh()
  if variant == "tiny":
    config.workloads = ("short",)
    config.workload_settings.short.max_new_tokens = 8
    config.num_prompts = 4
    config.batch_sizes = (1, 2)
  return config
