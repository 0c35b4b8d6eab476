# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Timing one RL step phase by phase, two learners side by side.

`grpo_step` builds an `Arm` per learner (a call per phase, each blocking on
its result) and times them here: round after round, each phase of every
arm in turn (diffusion rollout, AR rollout, diffusion reference, ...), so
a shared, noisy machine slows both alike. A phase keeps the median of its
timed rounds (rollouts sample afresh each round, so the work varies and
the fastest round would flatter the lucky draw); the step is the sum of
the phase medians.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping

import numpy as np

PHASES = ("rollout", "reference", "old", "train", "sync")
ARMS = ("diffusion", "ar")


@dataclasses.dataclass
class Arm:
  """One learner's phases and what its rollouts produced.

  Attributes:
    phases: phase name -> a call that runs it once and blocks on its result.
    visible_lengths: visible completion tokens of every timed rollout row.
    forwards: model forwards of every timed rollout row (diffusion only).
  """

  phases: dict[str, Callable[[], Any]]
  visible_lengths: list[int] = dataclasses.field(default_factory=list)
  forwards: list[int] = dataclasses.field(default_factory=list)


def time_rounds(
    arms: Mapping[str, Arm], *, warmup: int, repeats: int
) -> dict[str, dict[str, list[float]]]:
  """Seconds of every phase of every arm, per timed round, interleaved.

  A round runs each phase of every arm in `PHASES` order, the arms
  alternating within a phase. The first `warmup` rounds are not kept.
  """
  seconds = {a: {p: [] for p in PHASES} for a in arms}
  for round_index in range(warmup + repeats):
    for phase in PHASES:
      for name, arm in arms.items():
        start = time.perf_counter()
        arm.phases[phase]()
        elapsed = time.perf_counter() - start
        if round_index >= warmup:
          seconds[name][phase].append(elapsed)
    if round_index + 1 == warmup:
      for arm in arms.values():  # Count the timed rollouts alone.
        arm.visible_lengths.clear()
        arm.forwards.clear()
  return seconds


def summarize(seconds, arms: Mapping[str, Arm]) -> dict[str, Any]:
  """Per-phase medians and ratios, the step, and the rollouts' lengths."""
  median = {
      a: {p: float(np.median(seconds[a][p])) for p in PHASES} for a in ARMS
  }
  phases = {
      p: {
          "diffusion_s": median["diffusion"][p],
          "ar_s": median["ar"][p],
          "ratio": median["diffusion"][p] / max(median["ar"][p], 1e-12),
      }
      for p in PHASES
  }
  step = {a: sum(median[a].values()) for a in ARMS}
  diffusion = arms["diffusion"]
  return {
      "phases": phases,
      "step": {
          "diffusion_s": step["diffusion"],
          "ar_s": step["ar"],
          "ratio": step["diffusion"] / max(step["ar"], 1e-12),
      },
      "tokens_per_forward": float(
          sum(diffusion.visible_lengths) / max(sum(diffusion.forwards), 1)
      ),
      "mean_completion_length": {
          a: float(np.mean(arms[a].visible_lengths)) for a in ARMS
      },
      "seconds": seconds,
  }


def format_table(summary: Mapping[str, Any], caption: str) -> str:
  """The printed table: phase | diffusion s | AR s | ratio, then the step."""
  lines = [
      caption,
      f"  {'phase':<11}{'diffusion s':>13}{'AR s':>11}{'ratio':>9}",
  ]
  rows = [*summary["phases"].items(), ("step", summary["step"])]
  for name, row in rows:
    lines.append(
        f"  {name:<11}{row['diffusion_s']:>13.4f}{row['ar_s']:>11.4f}"
        f"{row['ratio']:>9.2f}"
    )
  lengths = summary["mean_completion_length"]
  lines.append(
      f"  diffusion rollout: {summary['tokens_per_forward']:.2f} tokens per"
      " forward; mean completion length: diffusion"
      f" {lengths['diffusion']:.1f}, AR {lengths['ar']:.1f} tokens"
  )
  return "\n".join(lines)
