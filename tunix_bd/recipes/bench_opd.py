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
import time

import ml_collections

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import settings as decode_settings
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import opd
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import trainer as sft_trainer
from tunix_bd.training import options
from tunix_bd.training import progress


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


def _until(deadline_s: float, batches):
  """Yields batches until `deadline_s` seconds after the first one."""
  start = None
  for batch in batches:
    start = time.perf_counter() if start is None else start
    if time.perf_counter() - start > deadline_s:
      return
    yield batch


def _sft_arm(config, mesh) -> tuple[str, int]:
  """Continued SFT of the student; returns its export and step count."""
  stage = _stage_config(config, "sft")
  workdir = os.path.join(config.workdir, "sft")
  tokenizer = tokenizer_lib.load_tokenizer(config.student, key="student")
  bd = bd_config_lib.load_settings(config.student)
  train_data, _ = dataset_lib.tokenized_splits(tokenizer, stage.data)
  with mesh_lib.tunix_context(mesh):
    model, _ = hf_checkpoint.load_qwen3(config.student, mesh=mesh)
  batches = batching.sft_batches(
      train_data,
      batch_size=config.batch_size,
      corruption=corruption_lib.SftCorruptionConfig.from_config_dict(
          stage.corruption
      ),
      config=bd,
      eos_id=tokenizer.eos_token_id,
      seed=config.seed,
      gradient_accumulation_steps=1,
  )
  train = config_utils.from_section(options.TrainSettings, stage.train, "train")
  trainer = sft_trainer.DiffusionSftTrainer(
      model,
      options.optimizer(train),
      options.training_config(train, workdir, "Continued SFT"),
      config=bd,
  )
  trainer.with_training_hooks(progress.ProgressLines("Continued SFT"))
  with mesh_lib.tunix_context(mesh):
    trainer.train(_until(config.time_budget_s, batches), None)
  export_dir = os.path.join(workdir, "export")
  export.export_qwen3(model, tokenizer, export_dir)
  bd_config_lib.save_settings(bd, export_dir)
  return export_dir, trainer.train_steps


def _evaluate(config, checkpoint: str, mesh) -> dict[str, float]:
  """The OPD arms' decode evaluation of an exported checkpoint."""
  tokenizer = tokenizer_lib.load_tokenizer(checkpoint)
  bd = bd_config_lib.load_settings(checkpoint)
  stage = _stage_config(config, "opd")
  stage.data.num_eval = config.num_eval
  _, eval_set = dataset_lib.conversations(stage.data)
  length = stage.rollout.max_prompt_length
  prompts = prompts_lib.encode_prompts(tokenizer, eval_set, length)
  with mesh_lib.tunix_context(mesh):
    model, _ = hf_checkpoint.load_qwen3(checkpoint, mesh=mesh)
    teacher, _ = hf_checkpoint.load_qwen3(config.teacher, mesh=mesh)
  decode = decode_settings.denoise_config(
      tokenizer, length, max_new_tokens=stage.rollout.max_new_tokens
  )
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=prompts,
      teacher=teacher,
      strategy=strategy_lib.DiffusionOpdStrategy(
          bd=bd, vocab_size=model.config.vocab_size
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
  sft_dir, sft_steps = _sft_arm(config, mesh)
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
