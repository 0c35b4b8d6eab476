# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A recipe's `decode` and `bd` sections, checked before anything is loaded.

`DecodeSettings` is the `decode` config section field for field (build it
with `config_utils.from_section(DecodeSettings, config.decode, "decode")`).
Every denoiser setting is checked by `DenoiseConfig` itself, one at a time,
so an error names the config key (`decode.threshold`) before any model or
tokenizer is read; `denoise_config` then binds the settings to a
tokenizer's stop and pad ids and to the prompts' length.
`CheckpointBdSettings` is the `bd` section of a recipe that decodes a
converted model: what it asserts of the checkpoint's settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from tunix_bd import config_utils
from tunix_bd.core import special_ids
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise

# `DecodeSettings` fields that are `DenoiseConfig` fields of the same name.
DENOISER_FIELDS = (
    "max_new_tokens",
    "rule",
    *commit_rules.PARAMETERS,
    "temperature",
    "use_cache",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeSettings(commit_rules.CommitSettings):
  """How a recipe decodes; see `denoise.DenoiseConfig` for the rule fields.

  Attributes:
    max_new_tokens: completion positions per row.
    max_prompt_length: the longest prompt accepted; 0 takes the longest
      prompt given.
    rule, threshold, top_k, factor, temperature, use_cache: as in
      `DenoiseConfig`.
    batch_size: rows per call (the last batch is padded; one program).
    seed: row `i` samples with seed `seed + i` (temperature > 0).
  """

  max_new_tokens: int = 16
  max_prompt_length: int = 0
  temperature: float = 0.0
  use_cache: bool = True
  batch_size: int = 64
  seed: int = 0

  def __post_init__(self):
    config_utils.check_int(
        "decode.max_prompt_length", self.max_prompt_length, 0
    )
    config_utils.check_int("decode.batch_size", self.batch_size, 1)
    config_utils.check_int("decode.seed", self.seed, 0)
    for name in DENOISER_FIELDS:
      check_denoise_setting(f"decode.{name}", name, getattr(self, name))

  def denoise_config(
      self, tokenizer: Any, max_prompt_length: int
  ) -> denoise.DenoiseConfig:
    """The denoiser's config for prompts of up to `max_prompt_length` tokens.

    `max_prompt_length` is used when this section's is 0.
    """
    return denoise_config(
        tokenizer,
        self.max_prompt_length or max_prompt_length,
        **{name: getattr(self, name) for name in DENOISER_FIELDS},
    )


def check_denoise_setting(key: str, field: str, value: Any) -> None:
  """Checks one `DenoiseConfig` setting alone, failing closed naming `key`.

  Args:
    key: the config key (e.g. "rollout.eval_temperature").
    field: the `DenoiseConfig` field it sets (e.g. "temperature").
    value: its value; the other fields are held at valid values, so the
      error names the key at fault.
  """
  one = dict(max_new_tokens=1, max_prompt_length=1)
  one[field] = value
  try:
    denoise.DenoiseConfig(**one)
  except ValueError as e:
    raise ValueError(f"{key}: {e}") from None


def denoise_config(
    tokenizer: Any, max_prompt_length: int, **settings
) -> denoise.DenoiseConfig:
  """`DenoiseConfig(**settings)` stopping at the tokenizer's EOS and its
  checkpoint's other stop ids (`special_ids.checkpoint_stop_ids`), with its
  pad."""
  return denoise.DenoiseConfig(
      max_prompt_length=max_prompt_length,
      stop_ids=(
          tokenizer.eos_token_id,
          *special_ids.checkpoint_stop_ids(tokenizer),
      ),
      pad_id=tokenizer.pad_token_id,
      **settings,
  )


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointBdSettings:
  """A decoding recipe's `bd`: the checkpoint's settings, asserted.

  A converted model is decoded with the settings it was converted with
  (its `block_diffusion.json`); one set here must agree with them. None:
  whatever it was trained with.
  """

  block_size: int | None = None
  mask_token_id: int | None = None
  alignment: str | None = None

  def __post_init__(self):
    for name, minimum in (("block_size", 1), ("mask_token_id", 0)):
      if getattr(self, name) is not None:
        config_utils.check_int(f"bd.{name}", getattr(self, name), minimum)

  def check(self, bd: Any) -> None:
    """Fails closed, naming `bd.KEY`, where `bd` disagrees with a setting."""
    check_checkpoint_settings(bd, dataclasses.asdict(self))


def check_checkpoint_settings(bd: Any, requested: Mapping[str, Any]) -> None:
  """Fails closed when a requested `bd.KEY` disagrees with the checkpoint's.

  Args:
    bd: the checkpoint's `BlockDiffusionConfig`.
    requested: `bd` section values; None means "whatever it was trained
      with".
  """
  for key, value in requested.items():
    if value is not None and getattr(bd, key) != value:
      raise ValueError(
          f"bd.{key}={value!r} disagrees with the checkpoint, which was "
          f"trained with {key}={getattr(bd, key)!r}; a block-diffusion "
          "model must be decoded with the settings it was converted with."
      )


def check_prompt_lengths(
    prompts: list[list[int]], max_prompt_length: int, *, key: str, where: str
) -> None:
  """Fails closed, listing the rows, if a prompt is longer than allowed.

  Args:
    prompts: token ids per row, as the user gave them (before any padding
      to a batch multiple).
    max_prompt_length: the limit.
    key: how the error names the limit (e.g. "decode.max_prompt_length").
    where: how the error names the rows' source (e.g. "prompts.jsonl").
  """
  long_rows = [i for i, p in enumerate(prompts) if len(p) > max_prompt_length]
  if long_rows:
    shown = ", ".join(f"{i} ({len(prompts[i])} tokens)" for i in long_rows[:8])
    more = f" and {len(long_rows) - 8} more" if len(long_rows) > 8 else ""
    raise ValueError(
        f"{key}={max_prompt_length} is shorter than rows {shown}{more} of "
        f"{where} (0-based); raise {key} or set it to 0 (the longest prompt)."
    )
