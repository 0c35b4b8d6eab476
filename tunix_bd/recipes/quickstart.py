# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `quickstart`: AR teacher -> block-diffusion SFT -> evaluation.

Runs the `ar_pretrain` and `sft` stages with their own configs (workdirs
under this run's; each resumes), then compares the AR teacher and the
conversion at several commit thresholds (`evaluation.comparison`) and writes
`report.{txt,json,png}` and `frontier.png`.
"""

from __future__ import annotations

import os
import time

import ml_collections

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.evaluation import comparison_report
from tunix_bd.evaluation import pair
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.recipes import ar_pretrain
from tunix_bd.recipes import sft
from tunix_bd.run import stage as stage_lib
from tunix_bd.run import workdir as workdir_lib


def _stage_config(config: ml_collections.ConfigDict, name: str):
  """Stage `name`'s config: same variant, under this run's workdir, trained
  on this run's `tasks` (the ones stage 3 evaluates)."""
  stage = config_files.get_config(name, config.variant)
  stage.workdir = os.path.join(config.workdir, name)
  stage.data.tasks = tuple(config.tasks)
  stage.lock()
  return stage


def validate(config: ml_collections.ConfigDict):
  """Fails closed on settings that cannot work, before any compute: this
  run's keys, then each stage's config; returns the stages' configs.

  The SFT stage's values alone: its checkpoint is the AR stage's export,
  which does not exist yet.
  """
  config_utils.check_int("num_prompts", config.num_prompts, 1)
  tasks_lib.check_names(config.tasks, "tasks")  # Of every stage.
  comparison_report.Settings.from_config(config, config.num_prompts)
  ar_config = _stage_config(config, "ar_pretrain")
  sft_config = _stage_config(config, "sft")
  sft_config.model.checkpoint = os.path.join(ar_config.workdir, "export")
  ar_pretrain.validate(ar_config)
  with stage_lib.values_only():
    sft.validate(sft_config)
  return ar_config, sft_config


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the three stages and writes the report; returns its rows."""
  workdir_lib.check(config.workdir)
  ar_config, sft_config = validate(config)
  start = time.monotonic()
  workdir = config.workdir
  ar_dir = sft_config.model.checkpoint
  workdir_lib.check(sft_config.workdir)
  held = workdir_lib.lock(workdir)  # Each stage holds its own workdir too.

  print(f"quickstart 1/3: AR teacher -> {ar_config.workdir}", flush=True)
  ar_pretrain.run(ar_config)
  print(
      f"quickstart 2/3: block-diffusion SFT -> {sft_config.workdir}",
      flush=True,
  )
  sft.run(sft_config)
  bd_dir = os.path.join(sft_config.workdir, "export")
  print(
      "quickstart 3/3: decoding the eval split, AR vs block diffusion",
      flush=True,
  )
  settings = comparison_report.Settings.from_config(config, config.num_prompts)
  mix = tasks_lib.TaskMix(tasks=tuple(config.tasks), seed=0)
  records = [
      {"messages": e.messages()[:1], "answer": e.answer, "task": e.task}
      for e in mix.examples("eval", config.num_prompts)
  ]
  rows = comparison_report.evaluate(
      pair.open_models(ar_dir, bd_dir),
      records,
      settings,
      config.mesh,
  )
  text = comparison_report.write_report(
      workdir,
      rows,
      settings,
      prompts=f"{config.num_prompts} eval prompts of {', '.join(config.tasks)}",
      title="AR teacher vs its block-diffusion conversion (embedded task)",
      seconds=time.monotonic() - start,
  )
  print(text)
  next_command = "tunix run --plugin tunix_bd generate.py"
  default_model = config_files.get_config("generate").model.checkpoint
  if os.path.abspath(bd_dir) != os.path.abspath(default_model):
    next_command += f" --config.model.checkpoint={bd_dir}"
  print(
      f"report: {os.path.join(workdir, 'report.txt')}, report.png and"
      " frontier.png "
      f"({time.monotonic() - start:.0f} s in all). Next, decode with the "
      f"converted model: {next_command}"
  )
  del held
  return rows
