# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decode prompts with a converted block-diffusion model.

On the embedded default, after the quickstart (whose converted model,
`runs/quickstart/sft/export`, is the default checkpoint):

  tunix run --plugin tunix_bd generate.py

On your prompts (`{"prompt": ..., "answer": ...}` per line), checking that
replaying each trace reproduces its recorded log-probs:

  tunix run --plugin tunix_bd generate.py \
      --config.model.checkpoint=runs/my_bd/export \
      --config.data.prompts=prompts.jsonl --config.decode.max_new_tokens=256 \
      --config.decode.temperature=0.7 --config.verify_replay=True

Writes `completions.jsonl` (per-row completion, correctness, forwards,
tokens per forward) under `workdir` and prints exact match, tokens per
forward and tokens/s. Variants: `default`; `long`, the `count` task with a
256-token budget on the `quickstart.py:long` model; `tiny` for smoke tests.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.generate import settings
from tunix_bd.models import sections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "long", "tiny"):
    raise ValueError(
        f"unknown generate variant {variant!r}; use 'default', 'long' or"
        " 'tiny'."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "generate"
  config.workdir = "runs/generate"
  config.output = ""  # Default: workdir/completions.jsonl.
  config.verify_replay = False
  # After `sft.py` alone: --config.model.checkpoint=runs/sft/export.
  # The converted model, compute dtype and remat (`models.sections`).
  config.model = config_utils.to_section(sections.DecodeModel)
  # Settings of the checkpoint (block_diffusion.json); set one to assert it:
  # a value that disagrees with the checkpoint is an error.
  config.bd = config_utils.to_section(settings.CheckpointBdSettings)
  # data.prompts: a {"prompt", "answer"} JSONL; empty: the embedded task.
  config.data = config_utils.to_section(data_settings.PromptData)
  # max_prompt_length 0: the longest prompt (`generate.settings`).
  config.decode = config_utils.to_section(settings.DecodeSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  if variant == "long":
    config.workdir = "runs/generate_long"
    config.model.checkpoint = "runs/quickstart_long/sft/export"
    config.data.update(tasks=("count",), num_prompts=64)
    config.decode.update(max_new_tokens=256, batch_size=32)
  if variant == "tiny":
    config.data.num_prompts = 8
    config.decode.update(max_new_tokens=8, batch_size=4)
  return config
