# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `compare`: an AR model vs its block-diffusion conversion.

The quickstart's last stage (`evaluation.comparison_report`) on any two
checkpoints and any `{"prompt", "answer"}` JSONL.
"""

from __future__ import annotations

import dataclasses
import os
import time

import ml_collections

from tunix_bd import mesh as mesh_lib
from tunix_bd.evaluation import comparison_report
from tunix_bd.evaluation import pair
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.models import sections
from tunix_bd.run import stage as stage_lib


@dataclasses.dataclass(frozen=True)
class CompareConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: sections.CompareModel
  data: data_settings.PromptData
  # The top-level keys `thresholds`, `batch_size`, ...
  comparison: comparison_report.Settings
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[CompareConfig]:
  """Fails closed on settings that cannot work, before any compute
  (`latency_prompts` against a prompt file's rows once they are read)."""
  stage = stage_lib.Stage(config, CompareConfig)
  data = stage.settings.data
  if not data.prompts:
    stage.settings.comparison.check_prompts(data.num_prompts)
  return stage


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Decodes the prompts with both models and writes the report."""
  start = time.monotonic()
  stage = validate(config)
  model, data = stage.settings.model, stage.settings.data
  models = pair.open_models(
      model.ar,
      model.bd,
      chat_template=data.chat_template,
      chat_options=data.chat_options,
  )
  # Both models must share the tokenizer the comparison renders with.
  teacher_lib.check_compatible(
      model.ar, models.ar_tokenizer, models.bd.tokenizer, key="model.ar"
  )
  warning = pair.conversion_warning(model, stage.identify)
  if warning:
    print(warning, flush=True)
  records, source = dataset_lib.prompt_records(data)
  settings = stage.settings.comparison
  settings.check_prompts(len(records))
  stage.hold()  # One run at a time: the report times each decode.
  rows = comparison_report.evaluate(
      models,
      records,
      settings,
      mesh_lib.make_mesh(stage.settings.mesh),
      precision=model,
      scan_layers=model.scan_layers,
  )
  text = comparison_report.write_report(
      config.workdir,
      rows,
      settings,
      prompts=f"{len(records)} prompts ({source})",
      title="AR model vs its block-diffusion conversion",
      seconds=time.monotonic() - start,
      warning=warning,
  )
  print(text)
  print(
      f"report: {os.path.join(config.workdir, 'report.txt')}, report.png and"
      f" frontier.png ({time.monotonic() - start:.0f} s in all)."
  )
  return rows
