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

Variants (`opd.py:VARIANT`): `default`; `smoke` (alias `tiny`), a random
tiny student and teacher and a few steps, needing no earlier run.
"""

import ml_collections

from tunix_bd import config_sections
from tunix_bd import config_utils
from tunix_bd.sft import corruption


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in ("default", "smoke", "tiny"):
    raise ValueError(
        f"unknown opd variant {variant!r}; use 'default' or 'smoke' ('tiny')."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "opd"
  config.workdir = "runs/opd"
  config.seed = 0

  config.model = ml_collections.ConfigDict(
      dict(
          # The block-diffusion student (with block_diffusion.json) and the
          # causal AR teacher, HF-style directories with one tokenizer: the
          # quickstart's. After `ar_pretrain.py` and `sft.py` run alone:
          # --config.model.student=runs/sft/export
          # --config.model.teacher=runs/ar_pretrain/export.
          student="runs/quickstart/sft/export",
          teacher="runs/quickstart/ar_pretrain/export",
          # Compute dtype, remat and the chunked head of student and teacher
          # (`tunix_bd.models.precision`).
          **config_sections.precision(),
          # `random_init`: a random student and teacher (smoke).
          **config_sections.random_init_model(block_size=4),
      )
  )
  # Prompts: the train split's (last assistant turn re-generated); the
  # held-out split's for evaluation (`num_eval` prompts).
  config.data = config_sections.embedded_data(num_eval=128)
  config.rollout = ml_collections.ConfigDict(
      dict(
          max_new_tokens=16,
          max_prompt_length=40,
          rule="threshold",
          threshold=0.9,
          temperature=1.0,
          use_cache=True,
          # Stop ids besides the tokenizer's EOS.
          extra_stop_ids=(),
      )
  )
  config.opd = ml_collections.ConfigDict(
      dict(canvas="corrupted", temperature=1.0, hard_loss_weight=0.0)
  )
  # The `corrupted` canvas's noise (SFT's per-block schedule).
  # The `corrupted` canvas's noise: SFT's schedule, one row, uniform.
  config.corruption = config_utils.to_section(corruption.SftCorruptionConfig)
  config.train = ml_collections.ConfigDict(
      dict(
          batch_size=16,
          gradient_accumulation_steps=1,
          max_steps=200,
          learning_rate=1e-4,
          warmup_steps=10,
          weight_decay=0.01,
          max_grad_norm=1.0,
          # Updates between decode evaluations (OPD evaluates by decoding
          # the held-out prompts; the last update is always evaluated).
          eval_every_n_steps=50,
          checkpoint_every_n_steps=50,
          checkpoints_to_keep=2,
          # > 0: also stop at the first step after this many seconds.
          time_budget_s=0.0,
      )
  )
  config.eval = ml_collections.ConfigDict(
      dict(batch_size=64, thresholds=(0.5, 0.9))
  )
  config.export = config_sections.export()
  config.mesh = config_sections.mesh()

  if variant in ("smoke", "tiny"):
    config.workdir = "runs/opd_smoke"
    config.model.random_init = True
    config.model.scratch.update(config_sections.tiny_model_shape())
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
