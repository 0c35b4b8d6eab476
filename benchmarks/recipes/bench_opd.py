# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_opd`: continued SFT vs OPD `corrupted` vs OPD `trace`.

From one block-diffusion student (`model.student`), each arm trains for the
same wall-time budget (compilation included) with the same optimizer
settings (`bench`), by the `opd` and `sft` recipes themselves (so each arm
is fingerprinted, evaluated and exported with provenance under
`workdir/<arm>`); then every arm's model is decoded greedily on the same
held-out prompts at each threshold: exact match and tokens per forward,
side by side, plus the starting student's (`benchmarks.equal_time`).
Arms run one after another in this process; writes `bench_opd.json`.
"""

from __future__ import annotations

import dataclasses
import json
import os

import ml_collections

from benchmarks import equal_time
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.distillation import sources
from tunix_bd.evaluation import report as report_lib
from tunix_bd.recipes import opd
from tunix_bd.recipes import sft
from tunix_bd.run import stage as stage_lib


@dataclasses.dataclass(frozen=True)
class BenchOpdConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: equal_time.EqualTimeModelSettings
  bench: equal_time.EqualTimeSettings
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[BenchOpdConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  return stage_lib.Stage(config, BenchOpdConfig)


def _shipped(name: str) -> ml_collections.ConfigDict:
  """Recipe `name`'s shipped default config, which an arm starts from."""
  return config_loading.load_config(plugin.PLUGIN.config_dir / f"{name}.py")


def _opd_config(stage, canvas: str) -> ml_collections.ConfigDict:
  return equal_time.opd_arm_config(
      _shipped("opd"),
      stage.settings.model,
      stage.settings.bench,
      canvas,
      seed=stage.config.seed,
      workdir=os.path.join(stage.workdir, f"opd_{canvas}"),
  )


def _opd_arm(stage, canvas: str, name: str) -> list[dict]:
  """The OPD arm's row (and the student's, from its `before`)."""
  config = _opd_config(stage, canvas)
  after = opd.run(config)
  report = json.loads(
      files.read_text(os.path.join(config.workdir, "report.json"))
  )
  return [
      dict(arm="start (SFT student)", steps=0, **report["before"]),
      dict(arm=name, steps=report["steps"], **after),
  ]


def _sft_arm(stage, mesh) -> dict:
  """Continued SFT of the student by the `sft` recipe, evaluated as OPD's."""
  config = equal_time.sft_arm_config(
      _shipped("sft"),
      stage.settings.model,
      stage.settings.bench,
      stage.settings.mesh,
      seed=stage.config.seed,
      workdir=os.path.join(stage.workdir, "sft"),
  )
  steps = sft.run(config)["steps"]
  metrics = equal_time.evaluate(
      os.path.join(config.workdir, "export"),
      _opd_config(stage, sources.CORRUPTED),
      mesh,
  )
  return dict(arm="continued SFT", steps=steps, **metrics)


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the arms and prints the side-by-side table."""
  stage = validate(config)
  stage.hold()  # One run at a time: another would skew the timings.
  mesh = mesh_lib.make_mesh(stage.settings.mesh)
  start, corrupted = _opd_arm(stage, sources.CORRUPTED, "OPD corrupted")
  _, trace = _opd_arm(stage, sources.TRACE, "OPD trace")
  rows = [start, corrupted, trace, _sft_arm(stage, mesh)]
  print(equal_time.format_table(rows, stage.settings.bench))
  report_lib.write_json(os.path.join(config.workdir, "bench_opd.json"), rows)
  return rows
