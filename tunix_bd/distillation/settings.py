# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""OPD's own config sections as frozen, checked dataclasses.

`OpdSettings` is the `opd` section. OPD's others: `rollout` is
`generate.settings.OpdRollout`, `eval` `training.options.DecodeEval`,
`train` `training.options.TimedTrain` (its `eval_every_n_steps` paces the
decode evaluation, OPD's only evaluation).
"""

from __future__ import annotations

import dataclasses

from tunix_bd import config_utils
from tunix_bd.distillation import sources


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
