# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion export SFT, OPD and GRPO write, checked before compute
(`ExportPlan.check`) and written once training is over (`ExportPlan.write`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Protocol

from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.models import bd_export
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import sections


class BlockShape(Protocol):
  """What a format checks of the model's blocks: a converted model's
  `BlockDiffusionConfig`, or SFT's `bd` section before it converts."""

  block_size: int
  alignment: str


@dataclasses.dataclass(frozen=True)
class ExportPlan:
  """`export/` as a run will write it: its `directory`, the run's `export`
  section, the chat switches trained with, and the `source` checkpoint's HF
  files whose fields it keeps (None for a random model)."""

  directory: str
  export: sections.ExportSettings
  chat_options: chat.ChatOptions
  source: hf_checkpoint.Source | None

  @classmethod
  def check(
      cls,
      directory: str,
      export: sections.ExportSettings,
      *,
      bd: BlockShape,
      model_config: Any,
      mask_token: str | None,
      chat_options: chat.ChatOptions,
      source: hf_checkpoint.Source | None,
  ) -> ExportPlan:
    """The plan, once `bd_export.check_exportable` passes."""
    bd_export.check_exportable(export.format, bd, model_config, mask_token)
    return cls(directory, export, chat_options, source)

  def write(
      self,
      model: Any,
      tokenizer: Any,
      bd: bd_config_lib.BlockDiffusionConfig,
      *,
      stop_ids: Iterable[int] = (),
      extra: Mapping[str, Any] | None = None,
  ) -> str:
    """Writes the trained `model` (`bd_export.export_block_diffusion`);
    returns the directory."""
    bd_export.export_block_diffusion(
        model,
        tokenizer,
        self.directory,
        bd=bd,
        chat_options=self.chat_options,
        source=self.source,
        dtype=self.export.dtype,
        fmt=self.export.format,
        reference_code=self.export.reference_code,
        stop_ids=stop_ids,
        extra=extra,
    )
    return self.directory
