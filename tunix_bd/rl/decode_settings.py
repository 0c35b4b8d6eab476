# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""How a GRPO run decodes: its `rollout` and `eval` sections.

`RolloutSettings` is how the policy samples its training rollouts (and
Tunix's eval rollouts); `EvalSettings` the held-out evaluation before and
after training (`rl.evaluation`). Frozen, checked dataclasses, field for
field, each built with `config_utils.from_section`, so a typo or a bad
value fails as a `ValueError` naming `section.key` before any model is
loaded. The other sections are `rl.settings`'.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tunix_bd import config_utils
from tunix_bd.core import special_ids
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings

# `RolloutSettings` fields that are `DenoiseConfig` fields of the same name.
_DENOISER_FIELDS = (*generate_settings.DENOISER_FIELDS, "max_prompt_length")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RolloutSettings(commit_rules.CommitSettings):
  """How the policy decodes its rollouts (see `denoise.DenoiseConfig`).

  Attributes:
    max_new_tokens: completion positions per row (the trace width T).
    max_prompt_length: the longest prompt accepted (fixes the layout).
    rule, threshold, factor, use_cache: as in `DenoiseConfig`.
    top_k: k of the `top_k` COMMIT rule (positions per step); never a
      vocabulary filter, which block denoising does not implement.
    temperature: training rollouts' sampling temperature, > 0 (GRPO needs
      groups that differ).
    eval_temperature: Tunix's eval rollouts' temperature; 0 is greedy.
    seed: the root of every rollout's per-row seeds.
    extra_stop_ids: stop ids besides the tokenizer's EOS.
  """

  max_new_tokens: int = 16
  max_prompt_length: int = 40
  threshold: float = 0.5
  temperature: float = 1.0
  eval_temperature: float = 0.0
  use_cache: bool = True
  seed: int = 0
  extra_stop_ids: tuple[int, ...] = ()

  def __post_init__(self):
    for name in _DENOISER_FIELDS:
      generate_settings.check_denoise_setting(
          f"rollout.{name}", name, getattr(self, name)
      )
    if self.temperature == 0:
      raise ValueError(
          "rollout.temperature must be > 0 for training: greedy rollouts"
          " make every sample of a group alike, so GRPO has no signal."
      )
    generate_settings.check_denoise_setting(
        "rollout.eval_temperature", "temperature", self.eval_temperature
    )
    config_utils.check_int("rollout.seed", self.seed, 0)
    extra = self.extra_stop_ids
    generate_settings.check_denoise_setting(
        "rollout.extra_stop_ids", "stop_ids", extra
    )
    extra = special_ids.check_distinct(special_ids.EXTRA_STOP_IDS_KEY, extra)
    object.__setattr__(self, "extra_stop_ids", extra)

  def stop_ids(self, tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's EOS, its checkpoint's other stop ids, then
    `extra_stop_ids` (`special_ids.tokenizer_stop_ids`)."""
    return special_ids.tokenizer_stop_ids(tokenizer, self.extra_stop_ids)

  def denoise_config(
      self, tokenizer: Any, *, evaluation: bool = False
  ) -> denoise.DenoiseConfig:
    """The denoiser's config: training's, or Tunix eval's (`evaluation`)."""
    values = {name: getattr(self, name) for name in _DENOISER_FIELDS}
    if evaluation:
      values["temperature"] = self.eval_temperature
    config = generate_settings.denoise_config(
        tokenizer, values.pop("max_prompt_length"), **values
    )
    return dataclasses.replace(config, stop_ids=self.stop_ids(tokenizer))


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalSettings:
  """Held-out evaluation before and after training (`rl.evaluation`).

  Attributes:
    num_prompts: held-out prompts (the data's eval split).
    thresholds: commit thresholds of the greedy evaluation.
    sampled_samples: samples per prompt of the sampled evaluation; 0: none.
    sampled_threshold: its commit threshold.
    sampled_temperature: its temperature, > 0.
    batch_size: prompts per decoding call.
    seed: sample `s` of prompt `i` uses seed `seed + s * num_prompts + i`,
      the same before and after training, so the two are paired.
  """

  # How the run is measured, never what it trains: a resume may change it.
  num_prompts: int = config_utils.resumable(default=256)
  thresholds: tuple[float, ...] = config_utils.resumable(default=(0.5, 0.9))
  sampled_samples: int = config_utils.resumable(default=4)
  sampled_threshold: float = config_utils.resumable(default=0.5)
  sampled_temperature: float = config_utils.resumable(default=1.0)
  batch_size: int = config_utils.resumable(default=64)
  seed: int = config_utils.resumable(default=0)

  def __post_init__(self):
    config_utils.check_int("eval.num_prompts", self.num_prompts, 1)
    config_utils.check_int("eval.sampled_samples", self.sampled_samples, 0)
    config_utils.check_int("eval.batch_size", self.batch_size, 1)
    config_utils.check_int("eval.seed", self.seed, 0)
    thresholds = self.thresholds
    if isinstance(thresholds, (str, bytes)) or not thresholds:
      raise ValueError(
          f"eval.thresholds must be a non-empty list, got {thresholds!r}."
      )
    for threshold in thresholds:
      generate_settings.check_denoise_setting(
          "eval.thresholds", "threshold", threshold
      )
    object.__setattr__(self, "thresholds", tuple(map(float, thresholds)))
    generate_settings.check_denoise_setting(
        "eval.sampled_threshold", "threshold", self.sampled_threshold
    )
    config_utils.check_number(
        "eval.sampled_temperature", self.sampled_temperature, 0, strict=True
    )
