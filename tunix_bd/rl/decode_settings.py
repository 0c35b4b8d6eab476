# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A GRPO run's `eval` section: held-out evaluation before and after.

`EvalSettings` is the section field for field (`rl.evaluation`), built with
`config_utils.from_section`, so a typo or a bad value fails as a
`ValueError` naming `eval.key` before any model is loaded. Its `rollout` is
`generate.settings.DecodeSettings`' `GRPO_ROLLOUT_KEYS`; the other sections
are `rl.settings`'.
"""

from __future__ import annotations

import dataclasses

from tunix_bd import config_utils
from tunix_bd.generate import settings as generate_settings


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
