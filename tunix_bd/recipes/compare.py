# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `compare`: an AR model vs its block-diffusion conversion.

The quickstart's last stage on any two checkpoints and any prompt set: a
user's own AR model, its `sft.py` export and their `{"prompt", "answer"}`
JSONL. Writes the report (`evaluation.comparison_report`) under `workdir`;
the frontier shows the exact match each commit threshold keeps and the
forwards and milliseconds it saves, which is how to tell whether a converted
model is ready for parallel decoding.
"""

from __future__ import annotations

import os
import time

import ml_collections

from tunix_bd.benchmarking import comparison_report
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.run import workdir as workdir_lib


def _check_checkpoints(config) -> None:
  for key in ("ar", "bd"):
    path = config.model[key]
    if not os.path.isdir(path):
      raise ValueError(
          f"model.{key}={path!r} is not a directory; the quickstart writes"
          " runs/quickstart/ar_pretrain/export (AR) and"
          " runs/quickstart/sft/export (its conversion)."
      )
  if not os.path.isfile(
      os.path.join(config.model.bd, bd_config_lib.SETTINGS_FILE)
  ):
    raise ValueError(
        f"model.bd={config.model.bd!r} has no"
        f" {bd_config_lib.SETTINGS_FILE}: it is not a block-diffusion"
        " model; convert it with sft.py first."
    )


def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Decodes the prompts with both models and writes the report."""
  start = time.monotonic()
  workdir_lib.check(config.workdir)
  _check_checkpoints(config)
  # Both models must share the tokenizer the comparison renders with.
  ar_tokenizer, bd_tokenizer = (
      tokenizer_lib.load_tokenizer(
          config.model[key], config.data.chat_template, key=f"model.{key}"
      )
      for key in ("ar", "bd")
  )
  teacher_lib.check_compatible(
      config.model.ar, ar_tokenizer, bd_tokenizer, key="model.ar"
  )
  records, source = dataset_lib.prompt_records(config.data)
  settings = comparison_report.Settings.from_config(config, len(records))
  rows = comparison_report.evaluate(
      config.model.ar,
      config.model.bd,
      records,
      settings,
      config.mesh,
      chat_template=config.data.chat_template,
      chat_options=chat.options_from_data(config.data),
      log=lambda line: print(line, flush=True),
  )
  text = comparison_report.write_report(
      config.workdir,
      rows,
      settings,
      prompts=f"{len(records)} prompts ({source})",
      title="AR model vs its block-diffusion conversion",
      seconds=time.monotonic() - start,
  )
  print(text)
  print(
      f"report: {os.path.join(config.workdir, 'report.txt')}, report.png and"
      f" frontier.png ({time.monotonic() - start:.0f} s in all)."
  )
  return rows
