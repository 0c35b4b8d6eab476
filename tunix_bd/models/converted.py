# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Opening a converted checkpoint: the one way every entrance reads one.

A converted checkpoint is `sft.py`'s (OPD's, GRPO's) `export/`, or an SDAR
or Fast-dLLM v2 directory. Every entrance opens it with `open_converted`, so
all read the same settings, tokenizer and chat switches; decoding loads its
model with `ConvertedModel.load` (matrices in the compute dtype), training
through `run.models.load` (float32 master weights).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import jax

from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.models import bd_formats
from tunix_bd.models import precision as precision_lib


@dataclasses.dataclass(frozen=True)
class ConvertedModel:
  """A converted checkpoint: model (None until loaded), tokenizer, BD
  settings, the chat switches it was trained with, and its directory."""

  model: Any
  tokenizer: Any
  bd: bd_config_lib.BlockDiffusionConfig
  chat_options: chat.ChatOptions
  path: str

  def load(
      self,
      mesh: jax.sharding.Mesh | None = None,
      precision: precision_lib.Precision = precision_lib.Precision(),
  ) -> ConvertedModel:
    """This checkpoint with its model loaded to decode at `precision`,
    sharded over `mesh` (`precision.load` with `decoding_only`)."""
    no_mesh = mesh is None
    with contextlib.nullcontext() if no_mesh else mesh_lib.tunix_context(mesh):
      model, _ = precision_lib.load(
          self.path, precision, mesh=mesh, decoding_only=True
      )
    return dataclasses.replace(self, model=model)


def open_converted(
    checkpoint: str,
    *,
    chat_template: str = "",
    options: chat.ChatOptions = chat.ChatOptions(),
    key: str = "checkpoint",
) -> ConvertedModel:
  """A converted checkpoint, its model not loaded: settings, tokenizer
  (with `chat_template`, a Jinja file, or "") and the chat switches it was
  trained with (`options` may only agree). Errors name `key`."""
  tokenizer = bd_formats.load_tokenizer(checkpoint, chat_template, key=key)
  bd = bd_formats.load_settings(checkpoint, key)
  trained = chat.trained_options(
      bd_formats.load_extra(checkpoint, chat.SETTINGS_KEY), options
  )
  return ConvertedModel(None, tokenizer, bd, trained, checkpoint)
