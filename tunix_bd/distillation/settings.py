# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""OPD's own config sections as frozen, checked dataclasses.

`OpdSettings` (`opd`) and `RolloutSettings` (`rollout`) are their sections
field for field and the one source of their defaults
(`config_utils.to_section`); `eval` is `run.sections.EvalSettings`'
`OPD_EVAL_KEYS`. The `train` section holds every
`training.options.TrainSettings` key (its `eval_every_n_steps` paces the
decode evaluation, OPD's only evaluation) and `time_budget_s`, which
`training.options.TimeBudget` holds (`options.split_train_section`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tunix_bd import config_utils
from tunix_bd.core import special_ids
from tunix_bd.distillation import sources
from tunix_bd.generate import commit_rules
from tunix_bd.generate import settings as generate_settings


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpdSettings:
  """The distillation objective (`strategy.DiffusionOpdStrategy`).

  Attributes:
    canvas: the student's canvas, one of `sources.CANVASES`: `corrupted`
      (the rollout re-corrupted like SFT) or `trace` (its own denoising
      canvases).
    temperature: tau of the teacher's and student's distributions, > 0.
    hard_loss_weight: weight of the CE on the teacher's argmax, >= 0.
  """

  canvas: str = sources.CORRUPTED
  temperature: float = 1.0
  hard_loss_weight: float = 0.0

  def __post_init__(self):
    if self.canvas not in sources.CANVASES:
      raise ValueError(
          f"opd.canvas must be one of {sources.CANVASES}, got {self.canvas!r}."
      )
    config_utils.check_number(
        "opd.temperature", self.temperature, 0, strict=True
    )
    config_utils.check_number("opd.hard_loss_weight", self.hard_loss_weight, 0)


# `RolloutSettings` fields that are `DenoiseConfig` fields of the same name:
# every one the generate recipe's `decode` section takes.
_DENOISER_FIELDS = generate_settings.DENOISER_FIELDS


@dataclasses.dataclass(frozen=True, kw_only=True)
class RolloutSettings(commit_rules.CommitSettings):
  """How the student decodes its rollouts (see `denoise.DenoiseConfig`).

  Attributes:
    max_new_tokens: completion positions per rollout.
    max_prompt_length: the longest prompt accepted.
    rule, threshold, top_k, factor, temperature, use_cache: as in
      `DenoiseConfig`.
    extra_stop_ids: stop ids besides the tokenizer's EOS.
  """

  max_new_tokens: int = 16
  max_prompt_length: int = 40
  temperature: float = 1.0
  use_cache: bool = True
  extra_stop_ids: tuple[int, ...] = ()

  def __post_init__(self):
    config_utils.check_int(
        "rollout.max_prompt_length", self.max_prompt_length, 1
    )
    for name in _DENOISER_FIELDS:
      generate_settings.check_denoise_setting(
          f"rollout.{name}", name, getattr(self, name)
      )
    extra = special_ids.check_distinct(
        special_ids.EXTRA_STOP_IDS_KEY, self.extra_stop_ids
    )
    object.__setattr__(self, "extra_stop_ids", extra)

  def stop_ids(self, tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's EOS, its checkpoint's other stop ids, then
    `extra_stop_ids` (`special_ids.tokenizer_stop_ids`)."""
    return special_ids.tokenizer_stop_ids(tokenizer, self.extra_stop_ids)

  def denoise_config(self, tokenizer: Any) -> Any:
    """The denoiser's config, stopping at `stop_ids`."""
    config = generate_settings.denoise_config(
        tokenizer,
        self.max_prompt_length,
        **{name: getattr(self, name) for name in _DENOISER_FIELDS},
    )
    return dataclasses.replace(config, stop_ids=self.stop_ids(tokenizer))
