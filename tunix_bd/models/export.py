# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Exported model directories: writing one, and finding those that exist.

An export is an HF-style Qwen3 directory (`hf_checkpoint`) with its
tokenizer; a block-diffusion export also holds `block_diffusion.json`.
"""

from __future__ import annotations

import glob
import os
import shutil

from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import hf_checkpoint


def export_qwen3(model, tokenizer, export_dir: str) -> None:
  """Writes the HF-style directory, replacing a previous export."""
  previous = export_dir + ".previous"
  if os.path.exists(export_dir):
    shutil.rmtree(previous, ignore_errors=True)
    os.replace(export_dir, previous)
  hf_checkpoint.save_qwen3(
      model,
      export_dir,
      tokenizer=tokenizer,
      hf_config_extra={
          "eos_token_id": tokenizer.eos_token_id,
          "pad_token_id": tokenizer.pad_token_id,
      },
  )
  shutil.rmtree(previous, ignore_errors=True)


def find_block_diffusion_exports(root: str, max_depth: int = 4) -> list[str]:
  """Directories under `root` (at most `max_depth` deep) holding a BD export."""
  found = []
  for depth in range(1, max_depth + 1):
    pattern = os.path.join(root, *["*"] * depth, bd_config_lib.SETTINGS_FILE)
    found += [os.path.dirname(p) for p in glob.glob(pattern)]
  return sorted(found)
