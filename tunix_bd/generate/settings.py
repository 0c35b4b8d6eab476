# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""How a recipe decodes (`decode`, `rollout`) and its `bd`, checked first.

`DecodeSettings` is generate's `decode` section and OPD's and GRPO's
`rollout` (each a subset of its keys). Every denoiser setting is checked by
`DenoiseConfig` itself, one at a time, so an error names the config key
(`decode.threshold`) before any model or tokenizer is read.
`CheckpointBdSettings` is the `bd` section of a recipe that decodes a
converted model: what it asserts of the checkpoint's settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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

# The sections a `DecodeSettings` is, each holding some of its keys (in field
# order): the `decode` of generate (`SECTION_KEYS`), OPD's and GRPO's
# `rollout`. A rule's parameter (`commit_rules.PARAMETERS`) is in each.
OPD_ROLLOUT_KEYS = (
    "rule",
    *commit_rules.PARAMETERS,
    "max_new_tokens",
    "max_prompt_length",
    "temperature",
    "use_cache",
    "extra_stop_ids",
)
GRPO_ROLLOUT_KEYS = (
    *OPD_ROLLOUT_KEYS[:-2],
    "eval_temperature",
    "use_cache",
    "seed",
    "extra_stop_ids",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeSettings(commit_rules.CommitSettings):
  """How a recipe decodes: generate's `decode`; OPD's and GRPO's `rollout`
  (`OPD_ROLLOUT_KEYS`, `GRPO_ROLLOUT_KEYS`), how the policy samples its
  training rollouts. See `denoise.DenoiseConfig` for the rule fields.

  Attributes:
    max_new_tokens: completion positions per row (the trace width T).
    max_prompt_length: the longest prompt accepted. A rollout's fixes the
      layout, >= 1; `decode`'s may be 0: the longest prompt given.
    rule, threshold, top_k, factor, use_cache: as in `DenoiseConfig`; `top_k`
      is the k of the `top_k` COMMIT rule (positions per step), never a
      vocabulary filter, which block denoising does not implement.
    temperature: the sampling temperature; GRPO's (with `eval_temperature`)
      is its training rollouts', > 0: greedy groups give no signal.
    eval_temperature: GRPO: Tunix's eval rollouts' temperature; 0 is greedy.
    batch_size: `decode`: rows per call (the last batch is padded; one
      program).
    seed: row `i` samples with seed `seed + i`; GRPO: the root of every
      rollout's per-row seeds.
    extra_stop_ids: rollouts: stop ids besides the tokenizer's EOS.
  """

  max_new_tokens: int = 16
  max_prompt_length: int = 0
  temperature: float = 0.0
  eval_temperature: float = 0.0
  use_cache: bool = True
  batch_size: int = 64
  seed: int = 0
  extra_stop_ids: tuple[int, ...] = ()

  SECTION_KEYS = (*OPD_ROLLOUT_KEYS[:-1], "batch_size", "seed")

  def __post_init__(self):
    key = lambda name: config_utils.key(name, "decode")
    keys = config_utils.section_keys(self)
    # A rollout (no `batch_size`: its trainer batches) lays out prompts it
    # has not seen: it needs a length, where `decode` may take the longest.
    config_utils.check_int(
        key("max_prompt_length"),
        self.max_prompt_length,
        0 if "batch_size" in keys else 1,
    )
    config_utils.check_int(key("batch_size"), self.batch_size, 1)
    config_utils.check_int(key("seed"), self.seed, 0)

    def check_alone(name, field, value):
      # `DenoiseConfig` checks the value, the other fields valid: the error
      # names the key at fault.
      try:
        denoise.DenoiseConfig(
            **{"max_new_tokens": 1, "max_prompt_length": 1, field: value}
        )
      except ValueError as e:
        raise ValueError(f"{key(name)}: {e}") from None

    for name in DENOISER_FIELDS:
      check_alone(name, name, getattr(self, name))
    if "eval_temperature" in keys and self.temperature == 0:
      raise ValueError(
          f"{key('temperature')} must be > 0 for training: greedy rollouts"
          " make every sample of a group alike, so GRPO has no signal."
      )
    check_alone("eval_temperature", "temperature", self.eval_temperature)
    extra = special_ids.check_distinct(
        key("extra_stop_ids"), self.extra_stop_ids
    )
    object.__setattr__(self, "extra_stop_ids", extra)

  def stop_ids(self, tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's EOS, its checkpoint's other stop ids, then
    `extra_stop_ids` (`special_ids.tokenizer_stop_ids`)."""
    return special_ids.tokenizer_stop_ids(tokenizer, self.extra_stop_ids)

  def denoise_config(
      self, tokenizer: Any, max_prompt_length: int = 0
  ) -> denoise.DenoiseConfig:
    """The denoiser's config, stopping at `stop_ids`, with the tokenizer's
    pad; `max_prompt_length` (the prompts' longest) is used when this
    section's is 0."""
    return denoise.DenoiseConfig(
        max_prompt_length=self.max_prompt_length or max_prompt_length,
        stop_ids=self.stop_ids(tokenizer),
        pad_id=tokenizer.pad_token_id,
        **{name: getattr(self, name) for name in DENOISER_FIELDS},
    )


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
    """Fails closed, naming `bd.KEY`, where the checkpoint's `bd` disagrees
    with a setting."""
    for key, value in dataclasses.asdict(self).items():
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

  `prompts` are token ids per row as the user gave them; `key` names the
  limit and `where` the rows' source in the error.
  """
  long_rows = [i for i, p in enumerate(prompts) if len(p) > max_prompt_length]
  if long_rows:
    shown = ", ".join(f"{i} ({len(prompts[i])} tokens)" for i in long_rows[:8])
    more = f" and {len(long_rows) - 8} more" if len(long_rows) > 8 else ""
    raise ValueError(
        f"{key}={max_prompt_length} is shorter than rows {shown}{more} of "
        f"{where} (0-based); raise {key} or set it to 0 (the longest prompt)."
    )
