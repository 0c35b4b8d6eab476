# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""OPD's `train` section: `TrainSettings` plus a wall-time budget.

The section holds every `training.options.TrainSettings` key (its
`eval_every_n_steps` paces the decode evaluation, OPD's only evaluation)
and `time_budget_s`, which `TimeBudget` holds; `train_settings` splits the
section between the two, so each dataclass maps its keys one to one.
"""

from __future__ import annotations

import dataclasses

from tunix_bd import config_utils
from tunix_bd import fingerprint
from tunix_bd.training import options


@dataclasses.dataclass(frozen=True)
class TimeBudget:
  """OPD's `train` keys beyond `TrainSettings`.

  Attributes:
    time_budget_s: > 0 also stops training at the first update boundary
      after this many seconds (equal-time comparisons); 0: no limit.
  """

  time_budget_s: float = fingerprint.resumable(default=0.0)

  def __post_init__(self):
    config_utils.check_number("train.time_budget_s", self.time_budget_s, 0)

  @property
  def seconds(self) -> float | None:
    """The budget in seconds; None when there is none."""
    return float(self.time_budget_s) or None


def train_settings(section) -> tuple[options.TrainSettings, TimeBudget]:
  """Splits OPD's `train` section into its two dataclasses, checked.

  Raises:
    ValueError: naming the key, for an unknown key or a bad value.
  """
  return options.split_train_section(section, TimeBudget)
