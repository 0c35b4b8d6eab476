# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The two checkpoints a comparison decodes, opened and checked as a pair:
`model.ar` and `model.bd` (`open_models`, nothing loaded), and the report's
warning when `model.bd` is not `model.ar`'s own conversion.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tunix_bd.core import families
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_formats
from tunix_bd.models import converted
from tunix_bd.models import hf_checkpoint


@dataclasses.dataclass(frozen=True)
class Models:
  """The two checkpoints of a comparison, opened, not loaded.

  Attributes:
    ar_dir, ar_tokenizer: the AR model (`model.ar`) and its tokenizer.
    bd: its conversion (`model.bd`), opened by `converted.open_converted`
      (also an SDAR or Fast-dLLM v2 directory).
  """

  ar_dir: str
  ar_tokenizer: Any
  bd: converted.ConvertedModel


def open_models(
    ar_dir: str,
    bd_dir: str,
    *,
    chat_template: str = "",
    chat_options: chat.ChatOptions = chat.ChatOptions(),
) -> Models:
  """`Models` of `model.ar` and `model.bd` (errors name the key), with the
  `data` section's `chat_template` (or "") and switches."""
  return Models(
      ar_dir,
      tokenizer_lib.load_tokenizer(ar_dir, chat_template, key="model.ar"),
      converted.open_converted(
          bd_dir,
          chat_template=chat_template,
          options=chat_options,
          key="model.bd",
      ),
  )


def _shape_warning(ar_dir: str, bd_dir: str) -> str:
  """Empty when `model.bd` has `model.ar`'s layers (and its vocabulary, or
  one row more: the mask token), else the warning naming what differs."""
  ar, bd = (
      bd_formats.model_config_from_hf(hf_checkpoint.read_config(path))
      for path in (ar_dir, bd_dir)
  )
  differ = [f"family {families.family(ar)} vs {families.family(bd)}"]
  if type(ar) is type(bd):
    differ = [
        f"{f.name}={getattr(ar, f.name)!r} vs {getattr(bd, f.name)!r}"
        for f in dataclasses.fields(ar)
        if getattr(ar, f.name) != getattr(bd, f.name)
        and (f.name != "vocab_size" or bd.vocab_size != ar.vocab_size + 1)
    ]
  if not differ:
    return ""
  return (
      f"WARNING: model.bd={bd_dir!r} is not a conversion of"
      f" model.ar={ar_dir!r}: their models differ ({'; '.join(differ[:3])})."
  )


def conversion_warning(model: Any, identify: Callable[[str], Any]) -> str:
  """The report's warning line when `model.bd` was converted from another
  model than `model.ar`, else "": other layers or vocabulary, or else an
  SFT export's `converted_from` digest that is not `model.ar`'s (a model
  trained further or imported records none). `identify`: `Stage.identify`.
  """
  shapes = _shape_warning(model.ar, model.bd)
  source = bd_formats.load_extra(model.bd, "converted_from")
  if (
      shapes
      or source is None
      or source.get("digest") == identify(model.ar).provenance()["digest"]
  ):
    return shapes
  named = source.get("path") or (
      "a random model"
      if source.get("random_init")
      else f"digest {source.get('digest')}"
  )
  return (
      f"WARNING: model.bd={model.bd!r} was converted from another checkpoint"
      f" ({named}) than model.ar={model.ar!r}, so this report does not"
      " compare a model with its own conversion."
  )
