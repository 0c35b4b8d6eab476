# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Quickstart: AR teacher -> block-diffusion SFT -> AR vs BD evaluation.

  tunix run --plugin tunix_bd quickstart.py

Trains the embedded AR teacher (`ar_pretrain.py`), converts it
(`sft.py`), then decodes the eval split with the teacher (Tunix's Sampler)
and with the converted model at several commit thresholds, ending with a
side-by-side table (exact match, batch-1 latency and batch-64 throughput,
each as a ratio to the Sampler) and `report.png` under `workdir`. Next:
`tunix run --plugin tunix_bd generate.py` decodes with the converted model.
The stages use their own configs (of the same variant); tune a stage by
running it directly.
Variants: `default`; `long`, the `count` task whose answers run to 254
characters, decoded with a 256-token budget (`runs/quickstart_long`, the
long workload of `bench_decode.py`); `tiny` for smoke tests (seconds of
training); `realistic`, a 0.1 B Qwen3 trained from scratch on the `trace`
task (worked program traces of about 120 to 190 characters, scored on the
whole answer and on its final answer), converted with 8-token blocks and
compared at batch 1, 8 and 64, on one TPU v5e chip (about 13 minutes
there: 2.5 of AR training, 4.5 of SFT, 3.3 of comparison; docs/results.md,
"Realistic trained model"):

  tunix run --plugin tunix_bd quickstart.py:realistic

and `realistic_tiny`, the same chain at CPU size for tests.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  variants = ("default", "long", "tiny", "realistic", "realistic_tiny")
  if variant not in variants:
    raise ValueError(
        f"unknown quickstart variant {variant!r}; use one of {variants}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "quickstart"
  config.variant = variant
  config.workdir = "runs/quickstart"
  # What both stages train on and stage 3 evaluates.
  config.tasks = ("sort", "reverse", "double")
  config.num_prompts = 256
  config.batch_size = 64  # Of the throughput measurement.
  config.max_new_tokens = 16
  # Batch-1 latency is timed on the first `latency_prompts` prompts; both
  # speeds take each batch's fastest of `repeats` interleaved passes.
  config.latency_prompts = 32
  config.repeats = 5
  config.thresholds = (0.5, 0.7, 0.9, 0.99)
  # Throughput is also measured at these batch sizes, each on its first
  # `extra_batches` batches (speed alone: accuracy is batch_size's, over
  # all prompts).
  config.extra_batch_sizes = ()
  config.extra_batches = 2
  # Our loop and block diffusion decode with the layers in one scan: each
  # program compiles one layer, not each (docs/design.md).
  config.scan_layers = False
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "long":
    config.workdir = "runs/quickstart_long"
    config.tasks = ("count",)
    config.num_prompts = 64
    config.batch_size = 32
    config.max_new_tokens = 256
    config.latency_prompts = 4
  if variant.startswith("realistic"):
    config.workdir = f"runs/quickstart_{variant}"
    config.tasks = ("trace",)
    config.num_prompts = 128
    config.max_new_tokens = 200  # The longest answer and its stop token.
    config.latency_prompts = 8
    config.repeats = 2
    config.thresholds = (0.9, 0.97, 0.99)
    config.extra_batch_sizes = (8,)
  if variant == "realistic_tiny":
    config.num_prompts = 8
    config.batch_size = 4
    config.latency_prompts = 2
    config.repeats = 1
    config.thresholds = (0.9,)
    config.extra_batch_sizes = (2,)
  if variant == "tiny":
    config.num_prompts = 8
    config.batch_size = 4
    config.max_new_tokens = 8
    config.latency_prompts = 2
    config.repeats = 1
    config.thresholds = (0.9,)
  return config
