# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What the GRPO run's report says: the reward curves and held-out rows.

The reward curves are read from `metrics.jsonl`, where Tunix's reward
manager logs, per step, the mean over rows of the summed reward
(`rewards/train/sum`) and of each reward function (`rewards/train/<name>`).
The held-out rows give each metric before and after with the paired change
and its standard error clustered by prompt (`rl.evaluation`), and, when
given, the same for an equal-compute continued-SFT model. `format_text` is
`report.txt`; `report.plot_report` draws the same as `report.png`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.training import metrics as metrics_lib

REWARD_PREFIX = "rewards/train/"
REWARD_SUM = REWARD_PREFIX + "sum"
# Statistics of the summed reward that Tunix logs beside `sum`.
_SUM_STATISTICS = ("sum", "mean", "min", "max")


def reward_curves(workdir: str) -> dict[str, list[tuple[int, float]]]:
  """Per-step train reward: `sum` first, then each reward function.

  Returns:
    Name (`sum` or a function's `__name__`) -> `(step, value)` pairs sorted
    by step; a step logged twice keeps its last value.
  """
  curves: dict[str, dict[int, float]] = {}
  for record in metrics_lib.read_records(workdir):
    name = record["name"]
    if not name.startswith(REWARD_PREFIX) or record["step"] is None:
      continue
    key = name[len(REWARD_PREFIX) :]
    if "/" in key or (key in _SUM_STATISTICS and key != "sum"):
      continue  # Tunix's `score/*` and the sum's min, max and mean.
    curves.setdefault(key, {})[int(record["step"])] = float(record["value"])
  order = sorted(curves, key=lambda k: (k != "sum", k))
  return {k: sorted(curves[k].items()) for k in order}


def metric_label(row: dict[str, Any]) -> str:
  """How the text and the figure name a held-out row's metric."""
  name, _, threshold = row["metric"].partition("@")
  if name == "exact_match":
    return f"greedy exact match, threshold {threshold}"
  if name == "tokens_per_forward":
    return f"greedy tokens/forward, threshold {threshold}"
  return f"sampled exact match ({row.get('setting', '')})"


def _format(metric: str, value: float, *, change: bool = False) -> str:
  if metric.startswith("tokens_per_forward"):
    return f"{value:+.2f}" if change else f"{value:.2f}"
  return f"{100 * value:+.1f} pts" if change else f"{value:.1%}"


def held_out_rows(
    before: evaluation_lib.HeldOutResult,
    after: evaluation_lib.HeldOutResult,
    continued_sft: evaluation_lib.HeldOutResult | None = None,
) -> list[dict[str, Any]]:
  """One row per metric: before, after, change ± paired SE (and SFT's)."""
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
  return rows


def format_text(
    rows: Sequence[dict[str, Any]],
    curves: dict[str, list[tuple[int, float]]],
    *,
    title: str,
    num_prompts: int,
) -> str:
  """The report as text: the train reward trend and the held-out table."""
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
  sft = any("continued_sft" in r for r in rows)
  width = max([len(metric_label(r)) + 2 for r in rows] + [24])
  header = (
      f"{f'held-out ({num_prompts} prompts)':<{width}}"
      f"{'before':>9}{'after':>9}{'change ± paired SE':>24}"
  )
  if sft:
    header += f"{'cont. SFT':>11}{'change ± paired SE':>24}"
  lines += ["", header]
  for r in rows:
    m = r["metric"]
    change = f"{_format(m, r['change'], change=True)} ± {_se(m, r)}"
    line = (
        f"{metric_label(r):<{width}}{_format(m, r['before']):>9}"
        f"{_format(m, r['after']):>9}{change:>24}"
    )
    if "continued_sft" in r:
      sft_change = (
          f"{_format(m, r['continued_sft_change'], change=True)} ±"
          f" {_se(m, r, 'continued_sft_change_se')}"
      )
      line += f"{_format(m, r['continued_sft']):>11}{sft_change:>24}"
    lines.append(line)
  return "\n".join(lines)


def _se(metric: str, row: dict[str, Any], key: str = "change_se") -> str:
  value = row[key]
  return f"{value:.2f}" if metric.startswith("tokens") else f"{100 * value:.1f}"
