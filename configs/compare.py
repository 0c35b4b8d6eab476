# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Your AR model vs its block-diffusion conversion, on your prompts.

After the quickstart (its AR teacher and converted model are the defaults),
on the embedded eval prompts:

  tunix run --plugin tunix_bd compare.py

On your own models and prompts (`{"prompt": ..., "answer": ...}` per line):

  tunix run --plugin tunix_bd compare.py \
      --config.model.ar=runs/my_teacher/export \
      --config.model.bd=runs/my_bd/export \
      --config.data.prompts=eval_prompts.jsonl --config.workdir=runs/my_compare

Decodes every prompt with Tunix's `Sampler` and our loop on the AR model and
with the converted model at each of `thresholds`, and writes `report.txt`
(exact match, tokens per forward, batch-1 latency and batch-N throughput,
each speed also as a ratio to the `Sampler`), `report.json`, `report.png` and
`frontier.png` (exact match against tokens per forward, latency and
throughput: where parallel decoding starts to pay) under `workdir`.
`--config.model.dtype=bfloat16` decodes both models in bfloat16. Variant
`tiny` for smoke tests.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.models import sections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "tiny"):
    raise ValueError(
        f"unknown compare variant {variant!r}; use 'default' or 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "compare"
  config.workdir = "runs/compare"
  # The AR model and its conversion (`models.sections.CompareModel`), both
  # decoded at model.dtype (bfloat16 compares as a chip serves them).
  config.model = config_utils.to_section(sections.CompareModel)
  # data.prompts: a {"prompt", "answer"} JSONL; empty: the embedded task.
  config.data = config_utils.to_section(data_settings.PromptData)
  config.thresholds = (0.5, 0.7, 0.9, 0.99)
  config.max_new_tokens = 16
  config.batch_size = 64  # Of the throughput measurement.
  # Batch-1 latency is timed on the first `latency_prompts` prompts; both
  # speeds take each batch's fastest of `repeats` interleaved passes.
  config.latency_prompts = 32
  config.repeats = 3
  # Throughput is also measured at these batch sizes, each on its first
  # `extra_batches` batches (speed alone: accuracy is batch_size's, over
  # all prompts).
  config.extra_batch_sizes = ()
  config.extra_batches = 2
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "tiny":
    config.data.num_prompts = 8
    config.thresholds = (0.9,)
    config.max_new_tokens = 8
    config.batch_size = 4
    config.latency_prompts = 2
    config.repeats = 1
  return config
