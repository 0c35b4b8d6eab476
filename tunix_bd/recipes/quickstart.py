# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `quickstart`: AR teacher -> block-diffusion SFT -> evaluation.

Runs the `ar_pretrain` and `sft` stages with their own configs (workdirs
under this run's; each resumes), then `evaluation.comparison_report` of the
AR teacher and its conversion.
"""

from __future__ import annotations

import dataclasses
import os
import time

import ml_collections

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.evaluation import comparison_report
from tunix_bd.evaluation import pair
from tunix_bd.models import precision as precision_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.recipes import ar_pretrain
from tunix_bd.recipes import sft
from tunix_bd.run import stage as stage_lib
from tunix_bd.run import workdir as workdir_lib


def _stage_configs(config: ml_collections.ConfigDict):
  """The AR and SFT stages' configs: this variant's, under this run's
  workdir, trained on this run's `tasks` (those stage 3 evaluates); SFT
  converts the AR stage's export."""
  stages = []
  for name in ("ar_pretrain", "sft"):
    stage = config_files.get_config(name, config.variant)
    stage.workdir = os.path.join(config.workdir, name)
    stage.data.tasks = tuple(config.tasks)
    stage.lock()
    stages.append(stage)
  stages[1].model.checkpoint = os.path.join(stages[0].workdir, "export")
  return stages


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuickstartSettings(comparison_report.Settings):
  """The recipe's top-level keys: what both stages train on and stage 3
  evaluates (`tasks`, on `num_prompts` eval prompts), and how stage 3
  decodes (`scan_layers`: as `compare.py`'s `model.scan_layers`)."""

  tasks: tuple[str, ...]
  num_prompts: int
  scan_layers: bool = False

  def __post_init__(self):
    config_utils.check_int("num_prompts", self.num_prompts, 1)
    config_utils.check_bool("scan_layers", self.scan_layers)
    tasks_lib.check_names(self.tasks, "tasks")  # Of every stage.
    object.__setattr__(self, "tasks", tuple(self.tasks))
    super().__post_init__()
    self.check_prompts(self.num_prompts)


@dataclasses.dataclass(frozen=True)
class QuickstartConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  comparison: QuickstartSettings
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[QuickstartConfig]:
  """Fails closed on settings that cannot work, before any compute: this
  run's keys, then each stage's config (SFT's values alone: its checkpoint,
  the AR stage's export, does not exist yet)."""
  stage = stage_lib.Stage(config, QuickstartConfig)
  ar_config, sft_config = _stage_configs(config)
  ar_pretrain.validate(ar_config)
  with stage_lib.values_only():
    sft.validate(sft_config)
  return stage


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the three stages and writes the report; returns its rows."""
  stage = validate(config)
  ar_config, sft_config = _stage_configs(config)
  settings = stage.settings.comparison
  start = time.monotonic()
  workdir = config.workdir
  ar_dir = sft_config.model.checkpoint
  workdir_lib.check(sft_config.workdir)
  stage.hold()  # Each stage holds its own workdir too.

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
  mix = tasks_lib.TaskMix(tasks=settings.tasks, seed=0)
  records = [
      {"messages": e.messages()[:1], "answer": e.answer, "task": e.task}
      for e in mix.examples("eval", settings.num_prompts)
  ]
  rows = comparison_report.evaluate(
      pair.open_models(ar_dir, bd_dir),
      records,
      settings,
      mesh_lib.make_mesh(stage.settings.mesh),
      # As the conversion computed: a bfloat16 chain compares in bfloat16.
      precision=precision_lib.Precision(dtype=sft_config.model.dtype),
      scan_layers=settings.scan_layers,
  )
  text = comparison_report.write_report(
      workdir,
      rows,
      settings,
      prompts=(
          f"{settings.num_prompts} eval prompts of {', '.join(settings.tasks)}"
      ),
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
  return rows
