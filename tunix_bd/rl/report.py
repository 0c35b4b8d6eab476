# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The GRPO run's report: the reward curve and held-out before and after.

`write_report` writes `report.txt`, `report.json` and `report.png` (left,
the train reward curves from `metrics.jsonl`; right, each held-out exact
match's change from before, and a continued-SFT model's, with its paired
standard error, `rl.evaluation`).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import jax
import numpy as np

from tunix_bd import files
from tunix_bd.evaluation import plot as plot_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import commit_rules
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.training import metrics as metrics_lib

REWARD_PREFIX = "rewards/train/"
REWARD_SUM = REWARD_PREFIX + "sum"


def reward_curves(workdir: str) -> dict[str, list[tuple[int, float]]]:
  """Per-step train reward (Tunix's mean over rows), `sum` first, then each
  reward function: name -> `(step, value)` sorted by step (the last of a
  step logged twice)."""
  curves: dict[str, dict[int, float]] = {}
  for record in metrics_lib.read_records(workdir):
    name = record["name"]
    if not name.startswith(REWARD_PREFIX) or record["step"] is None:
      continue
    key = name[len(REWARD_PREFIX) :]
    if "/" in key or key in ("mean", "min", "max"):
      continue  # Tunix's `score/*` and the sum's mean, min and max.
    curves.setdefault(key, {})[int(record["step"])] = float(record["value"])
  order = sorted(curves, key=lambda k: (k != "sum", k))
  return {k: sorted(curves[k].items()) for k in order}


def metric_label(row: dict[str, Any]) -> str:
  """How the text and the figure name a held-out row's metric."""
  name, _, label = row["metric"].partition("@")
  if name == "exact_match":
    return f"greedy exact match, {commit_rules.describe(label)}"
  if name == "final_answer":
    return f"greedy final answer, {commit_rules.describe(label)}"
  if name == "tokens_per_forward":
    return f"greedy tokens/forward, {commit_rules.describe(label)}"
  return f"sampled exact match ({row.get('setting', '')})"


def _format(metric: str, value: float, *, change: bool = False) -> str:
  if metric.startswith("tokens_per_forward"):
    return f"{value:+.2f}" if change else f"{value:.2f}"
  return f"{100 * value:+.1f} pts" if change else f"{value:.1%}"


def _change(metric: str, row: dict[str, Any], prefix: str = "") -> str:
  """`change ± paired SE` of a held-out row (`prefix` "continued_sft_": the
  continued-SFT model's)."""
  se = row[prefix + "change_se"]
  se = f"{se:.2f}" if metric.startswith("tokens") else f"{100 * se:.1f}"
  return f"{_format(metric, row[prefix + 'change'], change=True)} ± {se}"


_AFTER, _SFT = "#1f77b4", "#ff7f0e"
_CURVE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#8c564b")


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
    ax.plot(steps[window - 1 :], smooth, color=color, linewidth=2, label=label)
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
  """`TPF before -> after (SFT x)` of an accuracy row's setting."""
  name, _, label = metric.partition("@")
  if name == "final_answer":
    return ""  # Beside its exact-match row already.
  tokens_metric = f"tokens_per_forward@{label}"
  row = next((r for r in rows if r["metric"] == tokens_metric), None)
  if row is None:
    return ""
  text = f"\ntokens/forward {row['before']:.2f} → {row['after']:.2f}"
  if "continued_sft" in row:
    text += f" (SFT {row['continued_sft']:.2f})"
  return text


def _plot_held_out(ax, all_rows) -> None:
  """Each held-out accuracy's change (exact match, and final answer where
  answers state results), in points, with its paired SE (a point or two is
  a hair on a 0-100 % axis, so the axis is the change; the absolute values
  stand beside each dot)."""
  rows = [r for r in all_rows if not r["metric"].startswith("tokens")]
  series = [("", "after GRPO", _AFTER)]
  if any("continued_sft" in r for r in rows):
    series.append(("continued_sft_", "continued SFT", _SFT))
  offset = 0.36 / len(series)
  positions = np.arange(len(rows))[::-1]
  reach = 1.0  # Half-width of the axis, in points.
  for k, (prefix, label, color) in enumerate(series):
    changes, errors = 100 * np.asarray([
        [r.get(prefix + key, np.nan) for r in rows]
        for key in ("change", "change_se")
    ])
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
      metric_label(r).replace(" (", "\n(")
      + _tokens_per_forward(all_rows, r["metric"])
      for r in rows
  ]
  ax.axvline(0.0, color="black", linewidth=1)
  ax.set_yticks(positions, labels, fontsize=9)
  ax.set_ylim(-0.6, len(rows) - 0.4)
  ax.set_xlim(-1.6 * reach, 1.6 * reach)
  ax.set_xlabel("change in held-out accuracy (points), ± paired SE")
  ax.set_title("held-out accuracy: change from before", fontsize=10, pad=24)
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


def write_report(
    workdir: str,
    run: settings_lib.GrpoConfig,
    *,
    before: evaluation_lib.HeldOutResult,
    after: evaluation_lib.HeldOutResult,
    continued_sft: evaluation_lib.HeldOutResult | None = None,
    steps: int,
    train_seconds: float,
    kl_reference: str,
) -> dict[str, Any]:
  """Writes `report.txt`, `report.json` and `report.png`; returns the JSON.

  `before`, `after` and `continued_sft` (an equal-compute SFT model) are
  evaluations on the same prompts and seeds; `steps` the actor's updates;
  `kl_reference` as `recipes.grpo.kl_reference` states it.
  """
  title = (
      f"{run.description} on block-diffusion rollouts; KL reference:"
      f" {kl_reference}"
  )
  caption = (
      f"{steps} steps x {run.train.batch_size} prompts x"
      f" G={run.grpo.num_generations},"
      f" {commit_rules.describe(run.rollout.label())},"
      f" T={run.rollout.temperature:g}, {train_seconds:.0f} s on"
      f" {jax.device_count()} {jax.devices()[0].platform} device(s)"
  )
  curves = reward_curves(workdir)
  # One held-out row per metric: before, after, change ± paired SE (and
  # the continued-SFT model's).
  grpo = evaluation_lib.compare(before, after)
  sft = evaluation_lib.compare(before, continued_sft) if continued_sft else {}
  rows = []
  for metric, change in grpo.items():
    row = {
        "metric": metric,
        "before": change.before,
        "after": change.after,
        "change": change.delta,
        "change_se": change.se,
    }
    if metric == evaluation_lib.SAMPLED:
      row["setting"] = after.sampled_setting
    if metric in sft:
      row.update(
          continued_sft=sft[metric].after,
          continued_sft_change=sft[metric].delta,
          continued_sft_change_se=sft[metric].se,
      )
    rows.append(row)
  # The text: the train reward trend and the held-out table.
  lines = [title, ""]
  total = curves.get("sum", [])
  if total:
    values = np.asarray([v for _, v in total])
    span = max(1, len(values) // 10)
    lines.append(
        f"train reward ({REWARD_SUM}) over {len(values)} steps: first"
        f" {span} steps {values[:span].mean():.3f} -> last {span} steps"
        f" {values[-span:].mean():.3f}"
    )
  else:
    lines.append(f"train reward: no {REWARD_SUM} in metrics.jsonl")
  num_prompts = len(next(iter(before.greedy.values())).correct)
  width = max([len(metric_label(r)) + 2 for r in rows] + [24])
  header = (
      f"{f'held-out ({num_prompts} prompts)':<{width}}"
      f"{'before':>9}{'after':>9}{'change ± paired SE':>24}"
  )
  if any("continued_sft" in r for r in rows):
    header += f"{'cont. SFT':>11}{'change ± paired SE':>24}"
  lines += ["", header]
  for r in rows:
    m = r["metric"]
    line = (
        f"{metric_label(r):<{width}}{_format(m, r['before']):>9}"
        f"{_format(m, r['after']):>9}{_change(m, r):>24}"
    )
    if "continued_sft" in r:
      sft_change = _change(m, r, "continued_sft_")
      line += f"{_format(m, r['continued_sft']):>11}{sft_change:>24}"
    lines.append(line)
  text = "\n".join(lines)
  content = {
      "steps": steps,
      "train_seconds": train_seconds,
      "kl_reference": kl_reference,
      "held_out": rows,
      "reward_curves": {k: [list(p) for p in v] for k, v in curves.items()},
      "before": before.to_json(),
      "after": after.to_json(),
  }
  if continued_sft is not None:
    content["continued_sft"] = continued_sft.to_json()
  report_lib.write_json(os.path.join(workdir, "report.json"), content)
  files.write_text(os.path.join(workdir, "report.txt"), text + "\n")
  # The reward curves (left) and held-out exact match changes (right).
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, (left, right) = plt.subplots(
      1, 2, figsize=(13, 5.2), gridspec_kw=dict(width_ratios=(1, 1.15))
  )
  _plot_curves(left, curves)
  _plot_held_out(right, rows)
  fig.suptitle(title, fontsize=12)
  path = os.path.join(workdir, "report.png")
  plot_lib.save_with_caption(fig, path, caption, rect=(0, 0.1, 1, 0.95))
  print(text, flush=True)
  return content
