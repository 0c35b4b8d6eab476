# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""OPD vs continued SFT at equal wall time: the arms' configs and the table.

`bench_opd` trains one block-diffusion student three ways, each arm for
the same wall-time budget (compilation included) with the same optimizer
settings: the `opd` recipe with `corrupted` and with `trace` canvases, and
the `sft` recipe (continued SFT). Here: each arm's config, made from the
recipe's shipped one and `bench_opd`'s `model` and `bench` sections; the
OPD arms' greedy decode evaluation, for the continued-SFT export; and the
side-by-side table (exact match and tokens per forward at each threshold).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.generate import settings as generate_settings
from tunix_bd.generate import text
from tunix_bd.models import bd_formats
from tunix_bd.run import models
from tunix_bd.models import sections

_CHECKPOINT = config_utils.CHECKPOINT


@dataclasses.dataclass(frozen=True, kw_only=True)
class EqualTimeModelSettings:
  """`bench_opd`'s `model`: the student every arm starts from, the teacher.

  Attributes:
    student: the converted student (with block_diffusion.json).
    teacher: the AR teacher of the OPD arms and of the evaluation.
  """

  student: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  teacher: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )

  def directory_hint(self, key: str) -> str:
    del key
    return f"; on the embedded default {sections.RUN_THE_QUICKSTART}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EqualTimeSettings:
  """`bench_opd`'s `bench`: what every arm trains with, and the evaluation.

  Attributes:
    time_budget_s: wall seconds of each arm, compilation included (> 0).
    max_steps: sets the learning-rate schedule's length.
    learning_rate, warmup_steps, batch_size: every arm's `train` keys.
    rollout_threshold: the OPD arms' rollout commit threshold.
    hard_loss_weight: the OPD arms' hard-label weight.
    num_eval: held-out prompts decoded greedily.
    thresholds: the decode thresholds of the evaluation.
  """

  # Declared as the arms' `train` keys they set are (how far an arm goes,
  # not what its checkpoints mean); the benchmark itself fingerprints none.
  time_budget_s: float = config_utils.resumable(default=180.0)
  max_steps: int = config_utils.resumable(default=2000)
  learning_rate: float = 3e-4
  warmup_steps: int = 10
  batch_size: int = 16
  rollout_threshold: float = 0.9
  hard_loss_weight: float = 0.0
  num_eval: int = 256
  thresholds: tuple[float, ...] = (0.5, 0.9)

  def __post_init__(self):
    config_utils.check_number(
        "bench.time_budget_s", self.time_budget_s, 0, strict=True
    )
    for key in ("max_steps", "batch_size", "num_eval"):
      config_utils.check_int(f"bench.{key}", getattr(self, key), 1)
    config_utils.check_int("bench.warmup_steps", self.warmup_steps, 0)
    for key in ("learning_rate", "hard_loss_weight"):
      config_utils.check_number(f"bench.{key}", getattr(self, key), 0)
    config_utils.check_number(
        "bench.rollout_threshold", self.rollout_threshold, 0
    )
    object.__setattr__(self, "thresholds", tuple(self.thresholds))
    for value in self.thresholds:
      config_utils.check_number("bench.thresholds", value, 0)


def arm_config(
    base: ml_collections.ConfigDict,
    bench: EqualTimeSettings,
    *,
    seed: int,
    workdir: str,
) -> ml_collections.ConfigDict:
  """`base` (a recipe's fresh config) with every arm's training settings.

  `base` is set in place and returned.
  """
  base.seed = seed
  base.workdir = workdir
  base.train.update(
      max_steps=bench.max_steps,
      learning_rate=bench.learning_rate,
      warmup_steps=bench.warmup_steps,
      batch_size=bench.batch_size,
      eval_every_n_steps=bench.max_steps,
      checkpoint_every_n_steps=bench.max_steps,
      time_budget_s=bench.time_budget_s,
  )
  return base


def opd_arm_config(
    base: ml_collections.ConfigDict,
    model: EqualTimeModelSettings,
    bench: EqualTimeSettings,
    canvas: str,
    *,
    seed: int,
    workdir: str,
) -> ml_collections.ConfigDict:
  """The `opd` config of the OPD arm on `canvas` canvases."""
  config = arm_config(base, bench, seed=seed, workdir=workdir)
  config.model.update(student=model.student, teacher=model.teacher)
  config.opd.update(canvas=canvas, hard_loss_weight=bench.hard_loss_weight)
  config.rollout.threshold = bench.rollout_threshold
  config.data.num_eval = bench.num_eval
  config.eval.thresholds = bench.thresholds
  return config


def sft_arm_config(
    base: ml_collections.ConfigDict,
    model: EqualTimeModelSettings,
    bench: EqualTimeSettings,
    mesh: mesh_lib.MeshSettings,
    *,
    seed: int,
    workdir: str,
) -> ml_collections.ConfigDict:
  """The `sft` config of continued SFT of the student, on its own settings.

  The student's block-diffusion settings and mask token, so that SFT
  continues the student rather than converting it again.
  """
  config = arm_config(base, bench, seed=seed, workdir=workdir)
  config.model.checkpoint = model.student
  config.mesh.update(dataclasses.asdict(mesh))
  bd = bd_formats.load_settings(model.student, "student")
  tokenizer = bd_formats.load_tokenizer(model.student, key="student")
  config.bd.update(
      block_size=bd.block_size,
      alignment=bd.alignment,
      layout=bd.layout,
      mask_token=tokenizer.convert_ids_to_tokens(bd.mask_token_id),
  )
  return config


def evaluate(
    checkpoint: str, opd_config: ml_collections.ConfigDict, mesh
) -> dict[str, float]:
  """The OPD arms' decode evaluation (`opd_config`'s) of an export."""
  converted = text.load_model(checkpoint, mesh)
  tokenizer, model = converted.tokenizer, converted.model
  _, eval_set = dataset_lib.conversations(opd_config.data)
  length = opd_config.rollout.max_prompt_length
  prompts = prompts_lib.encode_prompts(tokenizer, eval_set, length)
  teacher = models.load_checkpoint(opd_config.model.teacher, mesh)
  decode = generate_settings.denoise_config(
      tokenizer, length, max_new_tokens=opd_config.rollout.max_new_tokens
  )
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=prompts,
      teacher=teacher,
      strategy=strategy_lib.DiffusionOpdStrategy(
          bd=converted.bd, vocab_size=model.config.vocab_size
      ),
      decode=decode,
      thresholds=tuple(opd_config.eval.thresholds),
      tokenizer=tokenizer,
      batch_size=opd_config.eval.batch_size,
  )
  with mesh_lib.tunix_context(mesh):
    return evaluation.evaluate(model)


def metric_names(thresholds: Sequence[float]) -> list[str]:
  """The table's metric columns: exact match and tokens per forward."""
  return [
      f"{m}@{t}"
      for t in thresholds
      for m in ("exact_match", "tokens_per_forward")
  ]


def format_table(
    rows: Sequence[Mapping[str, Any]], bench: EqualTimeSettings
) -> str:
  """The printed table: one row per arm, its steps and metrics."""
  names = metric_names(bench.thresholds)
  header = f"{'arm':<20} {'steps':>5} " + " ".join(f"{n:>24}" for n in names)
  lines = [
      (
          f"bench_opd: {bench.time_budget_s:.0f} s per arm, lr"
          f" {bench.learning_rate}, batch {bench.batch_size},"
          f" {bench.num_eval} held-out prompts, greedy; OPD rollouts at"
          f" threshold {bench.rollout_threshold}, hard_loss_weight"
          f" {bench.hard_loss_weight}"
      ),
      header,
  ]
  for row in rows:
    lines.append(
        f"{row['arm']:<20} {row['steps']:>5} "
        + " ".join(f"{row[n]:>24.3f}" for n in names)
    )
  return "\n".join(lines)
