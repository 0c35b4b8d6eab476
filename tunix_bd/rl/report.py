# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The GRPO run's report: the reward curve and held-out before and after.

`write_report` writes `report.txt`, `report.json` and `report.png` into the
workdir: the reward curves and held-out rows of `report_content`, drawn by
`report_plot`; `caption` says what was run, under the figure.
"""

from __future__ import annotations

import os
from typing import Any

import jax

from tunix_bd import files
from tunix_bd.evaluation import report as report_lib
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import report_content as content_lib
from tunix_bd.rl import report_plot
from tunix_bd.rl import settings as settings_lib


def caption(
    run: settings_lib.GrpoConfig, steps: int, train_seconds: float
) -> str:
  """The figure's caption: steps, batch, G, rollout settings, wall time."""
  return (
      f"{steps} steps x {run.train[0].batch_size} prompts x"
      f" G={run.grpo.num_generations}, threshold {run.rollout.threshold:g},"
      f" T={run.rollout.temperature:g}, {train_seconds:.0f} s on"
      f" {jax.device_count()} {jax.devices()[0].platform} device(s)"
  )


def write_report(
    workdir: str,
    *,
    before: evaluation_lib.HeldOutResult,
    after: evaluation_lib.HeldOutResult,
    continued_sft: evaluation_lib.HeldOutResult | None = None,
    title: str = "GRPO on block-diffusion rollouts",
    caption: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """Writes `report.txt`, `report.json` and `report.png` into `workdir`.

  Args:
    workdir: the run's directory (with its `metrics.jsonl`).
    before: the held-out evaluation of the starting model.
    after: the same evaluation (same prompts, seeds) after training.
    continued_sft: optionally, the same evaluation of the starting model
      trained with SFT for the same compute.
    title: the report's first line and the figure's title.
    caption: what was run, for the figure (settings, machine, wall time).
    extra: more JSON fields (e.g. steps, settings, wall times).

  Returns:
    The JSON content written.
  """
  curves = content_lib.reward_curves(workdir)
  rows = content_lib.held_out_rows(before, after, continued_sft)
  num_prompts = len(next(iter(before.greedy.values())).correct)
  text = content_lib.format_text(
      rows, curves, title=title, num_prompts=num_prompts
  )
  content = {
      **(extra or {}),
      "held_out": rows,
      "reward_curves": {k: [list(p) for p in v] for k, v in curves.items()},
      "before": before.to_json(),
      "after": after.to_json(),
  }
  if continued_sft is not None:
    content["continued_sft"] = continued_sft.to_json()
  report_lib.write_json(os.path.join(workdir, "report.json"), content)
  files.write_text(os.path.join(workdir, "report.txt"), text + "\n")
  report_plot.plot_report(
      curves,
      rows,
      os.path.join(workdir, "report.png"),
      title=title,
      caption=caption,
  )
  print(text, flush=True)
  return content
