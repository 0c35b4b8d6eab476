# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_opd`: continued SFT vs OPD `corrupted` vs OPD `trace`.

From one block-diffusion student, each arm trains for the same wall-time
budget (compilation included) with the same optimizer settings, then every
arm's model is decoded greedily on the same held-out prompts at each
threshold: exact match and tokens per forward, side by side, plus the
starting student's. Arms run one after another in this process.
"""

from __future__ import annotations

import json
import os

import ml_collections

from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import settings as decode_settings
from tunix_bd.generate import text
from tunix_bd.models import bd_formats
from tunix_bd.recipes import opd
from tunix_bd.recipes import sft
from tunix_bd.run import models
from tunix_bd.run import workdir as workdir_lib


def _stage_config(config, name: str) -> ml_collections.ConfigDict:
  stage = config_loading.load_config(plugin.PLUGIN.config_dir / f"{name}.py")
  stage.seed = config.seed
  stage.train.update(
      max_steps=config.max_steps,
      learning_rate=config.learning_rate,
      warmup_steps=config.warmup_steps,
      batch_size=config.batch_size,
      eval_every_n_steps=config.max_steps,
      checkpoint_every_n_steps=config.max_steps,
  )
  return stage


def _opd_arm(config, canvas: str) -> dict:
  stage = _stage_config(config, "opd")
  stage.workdir = os.path.join(config.workdir, f"opd_{canvas}")
  stage.model.update(student=config.student, teacher=config.teacher)
  stage.opd.update(canvas=canvas, hard_loss_weight=config.hard_loss_weight)
  stage.rollout.threshold = config.rollout_threshold
  stage.train.time_budget_s = config.time_budget_s
  stage.data.num_eval = config.num_eval
  stage.eval.thresholds = tuple(config.thresholds)
  after = opd.run(stage)
  report = json.loads(
      files.read_text(os.path.join(stage.workdir, "report.json"))
  )
  return {"before": report["before"], "after": after, "steps": report["steps"]}


def _sft_arm(config) -> tuple[str, int]:
  """Continued SFT of the student, by the `sft` recipe on the time budget.

  Returns:
    Its export and step count.
  """
  stage = _stage_config(config, "sft")
  stage.workdir = os.path.join(config.workdir, "sft")
  stage.model.checkpoint = config.student
  stage.train.time_budget_s = config.time_budget_s
  stage.mesh.update(config.mesh)
  # The student's own block-diffusion settings and mask token.
  bd = bd_formats.load_settings(config.student, "student")
  tokenizer = bd_formats.load_tokenizer(config.student, key="student")
  stage.bd.update(
      block_size=bd.block_size,
      alignment=bd.alignment,
      layout=bd.layout,
      mask_token=tokenizer.convert_ids_to_tokens(bd.mask_token_id),
  )
  losses = sft.run(stage)
  return os.path.join(stage.workdir, "export"), losses["steps"]


def _evaluate(config, checkpoint: str, mesh) -> dict[str, float]:
  """The OPD arms' decode evaluation of an exported checkpoint."""
  converted = text.load_model(checkpoint, mesh)
  tokenizer, model = converted.tokenizer, converted.model
  stage = _stage_config(config, "opd")
  stage.data.num_eval = config.num_eval
  _, eval_set = dataset_lib.conversations(stage.data)
  length = stage.rollout.max_prompt_length
  prompts = prompts_lib.encode_prompts(tokenizer, eval_set, length)
  teacher = models.load_checkpoint(config.teacher, mesh)
  decode = decode_settings.denoise_config(
      tokenizer, length, max_new_tokens=stage.rollout.max_new_tokens
  )
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=prompts,
      teacher=teacher,
      strategy=strategy_lib.DiffusionOpdStrategy(
          bd=converted.bd, vocab_size=model.config.vocab_size
      ),
      decode=decode,
      thresholds=tuple(config.thresholds),
      tokenizer=tokenizer,
      batch_size=stage.eval.batch_size,
  )
  with mesh_lib.tunix_context(mesh):
    return evaluation.evaluate(model)


def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the arms and prints the side-by-side table."""
  workdir_lib.check(config.workdir)
  for key in ("student", "teacher"):
    if not os.path.isdir(config[key]):
      raise ValueError(f"{key}={config[key]!r} is not a directory.")
  if config.time_budget_s <= 0:
    raise ValueError("time_budget_s must be > 0.")
  mesh = mesh_lib.from_section(config.mesh)
  rows = []
  corrupted = _opd_arm(config, sources.CORRUPTED)
  rows.append(dict(arm="start (SFT student)", steps=0, **corrupted["before"]))
  rows.append(
      dict(arm="OPD corrupted", steps=corrupted["steps"], **corrupted["after"])
  )
  trace = _opd_arm(config, sources.TRACE)
  rows.append(dict(arm="OPD trace", steps=trace["steps"], **trace["after"]))
  sft_dir, sft_steps = _sft_arm(config)
  rows.append(
      dict(
          arm="continued SFT",
          steps=sft_steps,
          **_evaluate(config, sft_dir, mesh),
      )
  )
  names = [
      f"{m}@{t}"
      for t in config.thresholds
      for m in ("exact_match", "tokens_per_forward")
  ]
  header = f"{'arm':<20} {'steps':>5} " + " ".join(f"{n:>24}" for n in names)
  lines = [
      (
          f"bench_opd: {config.time_budget_s:.0f} s per arm, lr"
          f" {config.learning_rate}, batch {config.batch_size},"
          f" {config.num_eval} held-out prompts, greedy; OPD rollouts at"
          f" threshold {config.rollout_threshold}, hard_loss_weight"
          f" {config.hard_loss_weight}"
      ),
      header,
  ]
  for row in rows:
    lines.append(
        f"{row['arm']:<20} {row['steps']:>5} "
        + " ".join(f"{row[n]:>24.3f}" for n in names)
    )
  print("\n".join(lines))
  report_lib.write_json(os.path.join(config.workdir, "bench_opd.json"), rows)
  return rows
