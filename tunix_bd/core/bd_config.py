# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion model settings and their fail-closed validation.

`BlockDiffusionConfig` holds what changes the meaning of a block-diffusion
model's logits: the block size, the mask token id, the target alignment
(docs/design.md "Target alignment") and the training canvas layout
("Single-canvas mask", "Clean-context layout"). Every stage takes the same
frozen object, so they cannot disagree about it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterable, Mapping


from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd.core import special_ids

SAME_POSITION = "same_position"
SHIFTED = "shifted"
ALIGNMENTS = (SAME_POSITION, SHIFTED)

SINGLE_CANVAS = "single_canvas"
CLEAN_CONTEXT = "clean_context"
LAYOUTS = (SINGLE_CANVAS, CLEAN_CONTEXT)


@dataclasses.dataclass(frozen=True)
class BlockDiffusionConfig:
  """What a block-diffusion model's logits mean.

  Attributes:
    block_size: tokens per block, >= 1; a token's block is
      `logical_position // block_size`.
    mask_token_id: the id of the mask token; never sampled, its logit is
      excluded from every softmax.
    alignment: one of `ALIGNMENTS`.
    layout: one of `LAYOUTS`, the canvas layout of the training forward.
  """

  block_size: int
  mask_token_id: int
  alignment: str = SHIFTED
  layout: str = CLEAN_CONTEXT

  def __post_init__(self):
    # Normalise NumPy ints so equality and hashing of configs are exact.
    for name, low in (("block_size", 1), ("mask_token_id", 0)):
      value = config_utils.check_int(name, getattr(self, name), low)
      object.__setattr__(self, name, value)
    for name, choices in (("alignment", ALIGNMENTS), ("layout", LAYOUTS)):
      config_utils.check_choice(name, getattr(self, name), choices)

  @classmethod
  def from_config_dict(cls, cfg: Mapping[str, Any]) -> BlockDiffusionConfig:
    """The config of a ConfigDict section (or mapping) of its fields."""
    values = config_utils.section_dict(cfg, "block-diffusion")
    for required in ("block_size", "mask_token_id"):
      if values.get(required) is None:
        raise ValueError(f"block-diffusion config is missing {required!r}.")
    return config_utils.from_section(cls, values, "block-diffusion")

  @classmethod
  def autoregressive(cls, mask_token_id: int) -> BlockDiffusionConfig:
    """One-token blocks with the shifted alignment: exactly AR decoding.

    Greedy (or sampled) next-token decoding through the same compiled loop,
    the baseline that isolates what parallel denoising saves; no used logit
    sees `mask_token_id`, so any id the model never predicts will do.
    """
    return cls(block_size=1, mask_token_id=mask_token_id, alignment=SHIFTED)

  def to_dict(self) -> dict[str, Any]:
    """Returns the fields as a plain dict (for metadata and fingerprints)."""
    return dataclasses.asdict(self)

  def validate_for_model(
      self,
      model_config: Any,
      *,
      pad_id: int | None,
      eos_id: int | None,
      stop_ids: Iterable[int] = (),
  ) -> None:
    """Checks that this config is usable with a model and tokenizer.

    The special ids must pass `special_ids.check` against the model's
    `vocab_size` (`pad_id` and `eos_id` None where the tokenizer has none);
    flash attention is refused.
    """
    vocab_size = config_utils.check_int(
        "model_config.vocab_size", getattr(model_config, "vocab_size", None), 1
    )
    special_ids.check(
        mask_token_id=self.mask_token_id,
        pad_id=pad_id,
        stop_ids=tuple(stop_ids),
        eos_id=eos_id,
        vocab_size=vocab_size,
    )
    if getattr(model_config, "use_flash_attention", False):
      # Tunix's Splash path builds its own causal mask and ignores the
      # attention mask passed in, so block-diffusion attention would be
      # silently causal.
      raise ValueError(
          "model_config.use_flash_attention=True is not supported: the Tunix"
          " flash (Splash) kernel hard-codes a causal mask and ignores the"
          " block-diffusion mask. Set use_flash_attention=False."
      )


# The file, beside `config.json`, that says a checkpoint is block-diffusion.
SETTINGS_FILE = "block_diffusion.json"


def save_settings(
    config: BlockDiffusionConfig,
    directory: str,
    extra: Mapping[str, Any] | None = None,
    *,
    mask_token: str | None = None,
) -> None:
  """Writes `config` (plus provenance `extra`) to `directory/SETTINGS_FILE`.

  `mask_token` is the mask token's string, written beside `mask_token_id`
  (None for an id no string encodes to); the id is what the model reads.
  """
  if mask_token is not None and not isinstance(mask_token, str):
    raise ValueError(
        f"mask_token must be a string or None, got {mask_token!r}."
    )
  settings = {**config.to_dict(), "mask_token": mask_token}
  content = {"block_diffusion": settings, **dict(extra or {})}
  files.write_text(
      os.path.join(directory, SETTINGS_FILE),
      json.dumps(content, indent=1, sort_keys=True),
  )


# What fixes an export's unreadable settings file.
_REEXPORT = (
    "relaunch the run that exported it with the same workdir to export it"
    " again."
)


def load_settings(
    directory: str, key: str | None = None
) -> BlockDiffusionConfig:
  """Reads the block-diffusion settings of an exported checkpoint.

  `key` is the config key naming `directory` in errors (e.g.
  `model.reference`); None names the directory alone.
  """
  path = os.path.join(directory, SETTINGS_FILE)
  if not files.exists(path):
    named = f"{key}={directory!r}" if key else directory
    raise ValueError(
        f"{named} has no {SETTINGS_FILE}: it is not a block-diffusion "
        "checkpoint (convert it with the `sft` recipe first)."
    )
  content = files.read_json(path, _REEXPORT)
  settings = dict(content["block_diffusion"])
  settings.pop("mask_token", None)  # Descriptive: the id is authoritative.
  return BlockDiffusionConfig.from_config_dict(settings)


def load_extra(directory: str, key: str) -> Any:
  """The top-level entry `key` of an export's settings file, or None."""
  path = os.path.join(directory, SETTINGS_FILE)
  if not files.exists(path):
    load_settings(directory)  # Raises, naming the directory.
  return files.read_json(path, _REEXPORT).get(key)
