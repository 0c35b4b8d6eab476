# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""On-policy distillation of the AR teacher into the block-diffusion student.

Launch on the embedded default, after the quickstart (whose AR teacher,
`runs/quickstart/ar_pretrain/export`, and converted student,
`runs/quickstart/sft/export`, are the defaults):

  tunix run --plugin tunix_bd opd.py

The student decodes training prompts by parallel block denoising at its
current weights (sampled at `rollout.temperature`), the causal teacher
scores the clean rollouts, and the student is trained with forward KL
(teacher || student) on its generated slots up to and including its first
stop token. `opd.canvas` picks the student's canvas: `corrupted` (the
rollout re-corrupted like SFT) or `trace` (the student's own denoising
canvases, each slot on the canvas it was committed from). The run ends with
held-out exact match and tokens per forward before and after, per
threshold, and exports the student to `workdir/export`.

Your own models (same tokenizer; the student converted by `sft.py`):

  tunix run --plugin tunix_bd opd.py \
      --config.model.student=runs/my_bd/export \
      --config.model.teacher=/path/to/Qwen3-0.6B \
      --config.data.train=train.jsonl --config.data.eval=eval.jsonl

Variants (`opd.py:VARIANT`): `default`; `realistic`, the 0.1 B `trace`
teacher and its conversion from `quickstart.py:realistic` (one TPU v5e
chip; its hyperparameters are the default's scaled to the task, not yet
tuned on the chip), with `realistic_tiny` its CPU-size twin after
`quickstart.py:realistic_tiny`:

  tunix run --plugin tunix_bd quickstart.py:realistic
  tunix run --plugin tunix_bd opd.py:realistic

`smoke` (alias `tiny`), a random tiny student and teacher and a few steps,
needing no earlier run.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.distillation import settings
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import from_scratch
from tunix_bd.models import sections
from tunix_bd.sft import corruption
from tunix_bd.training import options


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  variants = ("default", "realistic", "realistic_tiny", "smoke", "tiny")
  if variant not in variants:
    raise ValueError(f"unknown opd variant {variant!r}; use one of {variants}.")
  config = ml_collections.ConfigDict()
  config.recipe = "opd"
  config.workdir = "runs/opd"
  config.seed = 0

  # Each section takes its defaults from its settings dataclass, whose
  # docstring says what each key does; this config states what it changes.
  # model.student: the block-diffusion student (with block_diffusion.json)
  # and model.teacher the causal AR teacher, HF-style directories with one
  # tokenizer: the quickstart's. After `ar_pretrain.py` and `sft.py` run
  # alone: --config.model.student=runs/sft/export
  # --config.model.teacher=runs/ar_pretrain/export. `random_init`: a random
  # student and teacher (smoke).
  config.model = config_utils.to_section(sections.OpdModel)
  config.model.scratch_bd.block_size = 4
  # Prompts: the train split's (last assistant turn re-generated); the
  # held-out split's for evaluation (`num_eval` prompts).
  config.data = config_utils.to_section(data_settings.Data, num_eval=128)
  config.rollout = config_utils.to_section(
      generate_settings.OpdRollout,
      max_prompt_length=40,
      temperature=1.0,
  )
  config.opd = config_utils.to_section(settings.OpdSettings)
  # The `corrupted` canvas's noise: SFT's schedule, one row, uniform.
  config.corruption = config_utils.to_section(corruption.SftCorruptionConfig)
  # eval_every_n_steps: updates between decode evaluations (the last update
  # is always evaluated); time_budget_s > 0: also stop at the first step
  # after this many seconds.
  config.train = config_utils.to_section(
      options.TimedTrain,
      batch_size=16,
      gradient_accumulation_steps=1,
      max_steps=200,
      learning_rate=1e-4,
      eval_every_n_steps=50,
      checkpoint_every_n_steps=50,
  )
  config.eval = config_utils.to_section(options.DecodeEval)
  config.export = config_utils.to_section(sections.ExportSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)

  if variant.startswith("realistic"):
    config.workdir = f"runs/opd_{variant}"
    config.model.update(
        student=f"runs/quickstart_{variant}/sft/export",
        teacher=f"runs/quickstart_{variant}/ar_pretrain/export",
        dtype="bfloat16",
    )
    config.data.update(tasks=("trace",), max_length=304)
    # Prompts of up to 86 characters in the chat template; answers of up
    # to 194 and the stop token.
    config.rollout.update(max_new_tokens=200, max_prompt_length=112)
    config.train.update(
        max_steps=120, eval_every_n_steps=60, checkpoint_every_n_steps=60
    )
    # `quickstart.py:realistic`'s thresholds.
    config.eval.thresholds = (0.9, 0.97, 0.99)
  if variant == "realistic_tiny":
    config.model.dtype = "float32"
    config.data.update(num_train=64, num_eval=4)
    config.train.update(
        batch_size=4,
        max_steps=2,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(batch_size=4, thresholds=(0.9,))
  if variant in ("smoke", "tiny"):
    config.workdir = "runs/opd_smoke"
    config.model.random_init = True
    config.model.scratch.update(from_scratch.TINY_SHAPE)
    config.data.update(num_train=64, num_eval=8, max_len=3)
    config.rollout.update(max_new_tokens=8, max_prompt_length=32)
    config.train.update(
        batch_size=4,
        max_steps=4,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(batch_size=8)
  return config
