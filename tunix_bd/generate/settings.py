# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""How a recipe decodes (`decode`, `rollout`) and its `bd`, checked first.

`Decoding` is what every decoding section holds; `DecodeSettings` is
generate's `decode`, `OpdRollout` OPD's `rollout` and `GrpoRollout` GRPO's.
Each checks itself, naming the config key (`decode.threshold`), before any
model or tokenizer is read, and builds the one `DenoiseConfig` a run
decodes with (`denoise_config`). `CheckpointBdSettings` is the `bd` section
of a recipe that decodes a converted model: what it asserts of the
checkpoint's settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tunix_bd import config_utils
from tunix_bd.core import special_ids
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise


def denoise_config(
    tokenizer: Any,
    max_prompt_length: int,
    *,
    extra_stop_ids: tuple[int, ...] | None = None,
    **settings: Any,
) -> denoise.DenoiseConfig:
  """The one way settings and a tokenizer become a `DenoiseConfig`.

  `settings` are `denoise.Sampling` fields; the config stops at the
  tokenizer's EOS, its checkpoint's other stop ids, then `extra_stop_ids`
  (`special_ids.tokenizer_stop_ids`; None where the caller has no such
  setting, as generate's `decode`), with the tokenizer's pad.
  """
  return denoise.DenoiseConfig(
      max_prompt_length=max_prompt_length,
      stop_ids=special_ids.tokenizer_stop_ids(tokenizer, extra_stop_ids),
      pad_id=tokenizer.pad_token_id,
      **settings,
  )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decoding(denoise.Sampling):
  """What every decoding section holds (`denoise.Sampling`'s fields, and
  `max_prompt_length`: the longest prompt accepted, which fixes the layout,
  >= `MIN_PROMPT_LENGTH`; 0 where allowed: the longest prompt given)."""

  SECTION: ClassVar[str] = "rollout"
  # A rollout lays out prompts it has not seen: it needs a length.
  MIN_PROMPT_LENGTH: ClassVar[int] = 1

  max_prompt_length: int = 0

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_int(
        self.key("max_prompt_length"),
        self.max_prompt_length,
        self.MIN_PROMPT_LENGTH,
    )

  def denoise_config(
      self, tokenizer: Any, max_prompt_length: int = 0
  ) -> denoise.DenoiseConfig:
    """This section's `DenoiseConfig` (the module's `denoise_config`);
    `max_prompt_length` (the prompts' longest) is used when the section's
    is 0."""
    shared = dataclasses.fields(denoise.Sampling)
    return denoise_config(
        tokenizer,
        self.max_prompt_length or max_prompt_length,
        # A rollout's own stop ids; None where the section has no such key.
        extra_stop_ids=getattr(self, "extra_stop_ids", None),
        **{f.name: getattr(self, f.name) for f in shared},
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeSettings(Decoding):
  """Generate's `decode`.

  Attributes:
    batch_size: rows per call (the last batch is padded; one program).
    seed: row `i` samples with seed `seed + i`.
  """

  SECTION: ClassVar[str] = "decode"
  MIN_PROMPT_LENGTH: ClassVar[int] = 0

  batch_size: int = 64
  seed: int = 0

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_int(self.key("batch_size"), self.batch_size, 1)
    config_utils.check_int(self.key("seed"), self.seed, 0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpdRollout(Decoding):
  """OPD's `rollout`: how the policy samples its training rollouts.

  Attributes:
    extra_stop_ids: stop ids besides the tokenizer's EOS.
  """

  extra_stop_ids: tuple[int, ...] = ()

  def __post_init__(self):
    super().__post_init__()
    extra = special_ids.check_distinct(
        self.key("extra_stop_ids"), self.extra_stop_ids
    )
    object.__setattr__(self, "extra_stop_ids", extra)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GrpoRollout(OpdRollout):
  """GRPO's `rollout`. Its `temperature` is its training rollouts', > 0:
  greedy groups give no signal.

  Attributes:
    eval_temperature: Tunix's eval rollouts' temperature; 0 is greedy.
    seed: the root of every rollout's per-row seeds.
  """

  eval_temperature: float = 0.0
  seed: int = 0

  def __post_init__(self):
    super().__post_init__()
    if self.temperature == 0:
      raise ValueError(
          f"{self.key('temperature')} must be > 0 for training: greedy"
          " rollouts make every sample of a group alike, so GRPO has no"
          " signal."
      )
    value = self.eval_temperature
    ok = commit_rules.is_number(value) and value >= 0
    self.check("eval_temperature", ok, "a finite number >= 0")
    config_utils.check_int(self.key("seed"), self.seed, 0)


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
