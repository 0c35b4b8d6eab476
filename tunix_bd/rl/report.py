# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The GRPO run's report: the reward curve and held-out before and after.

`write_report` writes `report.txt`, `report.json` and `report.png` into the
workdir: the reward curves and held-out rows of `report_content`, drawn by
`plot_report` (left, the train reward curves, per step and a moving mean;
right, each held-out exact match's change from before, with its paired
standard error); `caption` says what was run, under the figure.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Sequence

import jax
import numpy as np

from tunix_bd import files
from tunix_bd.evaluation import plot as plot_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import report_content as content_lib
from tunix_bd.rl import settings as settings_lib

_AFTER, _SFT = "#1f77b4", "#ff7f0e"
_CURVE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#8c564b")


def plot_report(
    curves: dict[str, list[tuple[int, float]]],
    rows: Sequence[dict[str, Any]],
    path: str,
    *,
    title: str,
    caption: str,
) -> None:
  """The reward curve (left) and held-out exact match bars (right), PNG."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, (left, right) = plt.subplots(
      1, 2, figsize=(13, 5.2), gridspec_kw=dict(width_ratios=(1, 1.15))
  )
  _plot_curves(left, curves)
  _plot_held_out(right, rows)
  fig.suptitle(title, fontsize=12)
  plot_lib.save_with_caption(fig, path, caption, rect=(0, 0.1, 1, 0.95))


def _plot_curves(ax, curves) -> None:
  colors = itertools.cycle(_CURVE_COLORS)
  for name, points in curves.items():
    if not points:
      continue
    steps, values = map(np.asarray, zip(*points))
    color = next(colors)
    label = "total" if name == "sum" else name
    ax.plot(steps, values, color=color, alpha=0.25, linewidth=1)
    window = max(1, min(10, len(values) // 5))
    smooth = np.convolve(values, np.ones(window) / window, mode="valid")
    ax.plot(
        steps[window - 1 :],
        smooth,
        color=color,
        linewidth=2,
        label=label,
    )
  if curves:
    _legend_above(ax, len(curves))
  else:
    ax.text(0.5, 0.5, "no reward logged", ha="center", transform=ax.transAxes)
  ax.set_title(
      "train reward, mean over rollouts (thin: per step; thick: moving mean)",
      fontsize=10,
      pad=24,
  )
  ax.set_xlabel("step")
  ax.set_ylabel("reward")
  ax.grid(alpha=0.3)


def _tokens_per_forward(rows, metric: str) -> str:
  """`TPF before -> after (SFT x)` of an exact-match row's threshold."""
  row = next(
      (
          r
          for r in rows
          if r["metric"] == metric.replace("exact_match", "tokens_per_forward")
      ),
      None,
  )
  if row is None:
    return ""
  text = f"\ntokens/forward {row['before']:.2f} → {row['after']:.2f}"
  if "continued_sft" in row:
    text += f" (SFT {row['continued_sft']:.2f})"
  return text


def _plot_held_out(ax, all_rows) -> None:
  """Each held-out exact match's change, in points, with its paired SE.

  A run moves exact match by a point or two: on a 0-100 % axis that is a
  hair's width, so the axis is the change itself, centred on zero, and the
  absolute values stand beside each dot.
  """
  rows = [r for r in all_rows if "exact_match" in r["metric"]]
  series = [("", "after GRPO", _AFTER)]
  if any("continued_sft" in r for r in rows):
    series.append(("continued_sft_", "continued SFT", _SFT))
  offset = 0.36 / len(series)
  positions = np.arange(len(rows))[::-1]
  reach = 1.0  # Half-width of the axis, in points.
  for k, (prefix, label, color) in enumerate(series):
    changes = np.asarray([100 * r.get(prefix + "change", np.nan) for r in rows])
    errors = np.asarray(
        [100 * r.get(prefix + "change_se", np.nan) for r in rows]
    )
    y = positions + (len(series) - 1 - 2 * k) * offset
    ax.errorbar(
        changes, y, xerr=errors, fmt="o", color=color, capsize=4, label=label
    )
    after_key = "after" if not prefix else "continued_sft"
    for x, yi, e, r in zip(changes, y, errors, rows):
      if not np.isfinite(x):
        continue
      reach = max(reach, abs(x) + (e if np.isfinite(e) else 0))
      ax.annotate(
          f"{x:+.1f} ± {e:.1f}  ({100 * r['before']:.1f} →"
          f" {100 * r[after_key]:.1f} %)",
          (x, yi),
          textcoords="offset points",
          xytext=(0, 8),
          ha="center",
          fontsize=8,
          bbox=dict(facecolor="white", edgecolor="none", pad=1),
      )
  labels = [
      content_lib.metric_label(r).replace(" (", "\n(")
      + _tokens_per_forward(all_rows, r["metric"])
      for r in rows
  ]
  ax.axvline(0.0, color="black", linewidth=1)
  ax.set_yticks(positions, labels, fontsize=9)
  ax.set_ylim(-0.6, len(rows) - 0.4)
  ax.set_xlim(-1.6 * reach, 1.6 * reach)
  ax.set_xlabel("change in held-out exact match (points), ± paired SE")
  ax.set_title("held-out exact match: change from before", fontsize=10, pad=24)
  ax.grid(axis="x", alpha=0.3)
  _legend_above(ax, len(series))


def _legend_above(ax, columns: int) -> None:
  """The legend in one row between the title and the axes: over no data."""
  ax.legend(
      fontsize=8,
      loc="lower center",
      bbox_to_anchor=(0.5, 1.0),
      ncol=columns,
      frameon=False,
  )


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
  plot_report(
      curves,
      rows,
      os.path.join(workdir, "report.png"),
      title=title,
      caption=caption,
  )
  print(text, flush=True)
  return content
