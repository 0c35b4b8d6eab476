# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The comparison as figures: speed relative to AR, and the frontier.

`plot_comparison`: one bar per method, batch-1 speedup and batch-N
throughput as ratios to Tunix's AR `Sampler`; `plot_frontier`: exact match
against tokens per forward and against batch-1 latency.
"""

from __future__ import annotations

import io
import textwrap
from typing import Any, Sequence

from tunix_bd import files
from tunix_bd.evaluation import comparison

_AR_COLOR = "#7f7f7f"
_BD_COLOR = "#1f77b4"


def plot_comparison(
    rows: Sequence[dict[str, Any]],
    path: str,
    *,
    batch_size: int,
    title: str,
    caption: str,
) -> None:
  """Writes the figure of `comparison_report.evaluate`'s rows to `path` (PNG).

  Two panels share the method axis, ratios to the AR `Sampler` (the dashed
  line at 1x). Each bar is labelled with its ratio and each method with its
  exact match, so nothing is placed by hand and nothing can overlap; colour
  tells AR from block diffusion, and the caption states what was measured.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import lines  # pylint: disable=g-import-not-at-top
  from matplotlib import patches  # pylint: disable=g-import-not-at-top
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  labels = [
      f"{r['method']}\n{r['exact_match']:.1%} exact,"
      f" {r['tokens_per_forward']:.2f} tokens/forward"
      for r in rows
  ]
  colors = [
      _AR_COLOR if r["method"].startswith("AR") else _BD_COLOR for r in rows
  ]
  # Each panel: the ratio drawn, and the absolute speed beside it.
  panels = (
      (
          "batch1_speedup_vs_ar",
          "batch 1: speed vs AR Sampler (latency)",
          lambda r: f"{r['batch1_ms']:.2f} ms/prompt",
      ),
      (
          "throughput_vs_ar",
          f"batch {batch_size}: throughput vs AR Sampler",
          lambda r: f"{r['tokens_per_s']:,.0f} tokens/s",
      ),
  )
  fig, axes = plt.subplots(
      1, 2, figsize=(11, 0.6 * len(rows) + 2.4), sharey=True
  )
  positions = list(range(len(rows)))[::-1]  # The reference on top.
  for ax, (key, panel_title, absolute) in zip(axes, panels):
    values = [r[key] for r in rows]
    bars = ax.barh(positions, values, color=colors, height=0.6)
    # On a white box: a label never crosses the 1x line.
    ax.bar_label(
        bars,
        labels=[f"{v:.2f}x ({absolute(r)})" for v, r in zip(values, rows)],
        padding=3,
        fontsize=8,
        bbox=dict(facecolor="white", edgecolor="none", pad=1),
        zorder=3,
    )
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1, zorder=2)
    ax.set_xlim(0, max(values) * 1.8)  # Room for the labels.
    ax.set_title(panel_title, fontsize=10)
    ax.set_xlabel("ratio to Tunix's AR Sampler (higher is faster)")
    ax.grid(axis="x", alpha=0.3)
  axes[0].set_yticks(positions, labels, fontsize=9)
  fig.suptitle(title, fontsize=12)
  # Above the panels, under the title: never over a bar.
  fig.legend(
      handles=[
          patches.Patch(color=_AR_COLOR, label="autoregressive"),
          patches.Patch(color=_BD_COLOR, label="block diffusion"),
          lines.Line2D([], [], color="black", linestyle="--", label="1x = AR"),
      ],
      loc="upper center",
      bbox_to_anchor=(0.5, 0.95),
      ncol=3,
      fontsize=9,
      frameon=False,
  )
  save_with_caption(fig, path, caption, rect=(0, 0.08, 1, 0.92))


def save_with_caption(
    fig, path: str, caption: str, *, rect: tuple[float, float, float, float]
) -> None:
  """Lays `fig` out above a wrapped caption, writes it to `path` and closes it.

  `path` may be a URL (`tunix_bd.files`). `rect` is the `(left, bottom,
  right, top)` figure fraction the panels fill: the caption sits below
  `bottom`, titles and legends above `top`.
  """
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  caption = "\n".join(textwrap.wrap(caption, 150))
  fig.text(0.01, 0.01, caption, fontsize=8, va="bottom")
  fig.tight_layout(rect=rect)
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=150)
  files.write_bytes(path, png.getvalue())
  plt.close(fig)


def plot_frontier(
    rows: Sequence[dict[str, Any]], path: str, *, caption: str
) -> None:
  """Writes the speed/accuracy frontier of `comparison_report.evaluate`'s rows.

  Exact match against tokens per forward (machine-independent; the prompts'
  TPF ceiling dashed) and against measured batch-1 latency, where Tunix's AR
  `Sampler` is a point of its own (its TPF is the AR teacher's). A model
  stage's points (`comparison.frontier`) are joined in order of TPF.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  ceiling = next(r["tpf_ceiling"] for r in rows if r["tpf_ceiling"] is not None)
  sampler = next(r for r in rows if r["method"] == comparison.AR_SAMPLER)
  fig, axes = plt.subplots(1, 2, figsize=(13, 5))
  panels = (
      ("tokens_per_forward", "tokens per forward (higher: fewer forwards)"),
      ("batch1_ms", "batch-1 latency, ms per prompt (lower: faster)"),
  )
  frontier = comparison.frontier(rows)
  for ax, (key, xlabel) in zip(axes, panels):
    for stage, points in frontier.items():
      points = sorted(points, key=lambda p: p["tokens_per_forward"])
      x = [p[key] for p in points]
      y = [100 * p["exact_match"] for p in points]
      ax.plot(x, y, marker="o", label=stage)
      # Points that coincide (thresholds that commit alike) share a label.
      labels = {}
      for p, xi, yi in zip(points, x, y):
        labels.setdefault((round(xi, 2), round(yi, 1)), []).append(p["label"])
      for (xi, yi), names in labels.items():
        ax.annotate(
            ", ".join(sorted(names, key=lambda n: (len(n), n))),
            (xi, yi),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    if key == "tokens_per_forward":
      ax.axvline(
          ceiling, color="black", linestyle="--", linewidth=1,
          label=f"TPF ceiling {ceiling:.2f}",
      )  # fmt: skip
    else:
      ax.plot(
          sampler["batch1_ms"],
          100 * sampler["exact_match"],
          marker="*",
          markersize=12,
          linestyle="none",
          color="black",
          label="AR teacher, Tunix Sampler",
      )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("exact match (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="best")
  fig.suptitle(
      "Speed/accuracy frontier: exact match vs tokens per forward and vs"
      " batch-1 latency",
      fontsize=11,
  )
  save_with_caption(fig, path, caption, rect=(0, 0.1, 1, 0.95))
