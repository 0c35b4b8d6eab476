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
    fig,
    path: str,
    caption: str,
    *,
    rect: tuple[float, float, float, float],
    width: int = 150,
) -> None:
  """Lays `fig` out above a wrapped caption, writes it to `path` and closes it.

  `path` may be a URL (`tunix_bd.files`). `rect` is the `(left, bottom,
  right, top)` figure fraction the panels fill: the caption sits below
  `bottom`, titles and legends above `top`. `width` is characters per caption
  line.
  """
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  caption = "\n".join(textwrap.wrap(caption, width))
  fig.text(0.01, 0.01, caption, fontsize=8, va="bottom")
  fig.tight_layout(rect=rect)
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=150)
  files.write_bytes(path, png.getvalue())
  plt.close(fig)


def plot_frontier(
    series: dict[str, Sequence[dict[str, Any]]],
    path: str,
    *,
    title: str,
    caption: str,
    ceiling: float | None = None,
    reference: dict[str, Any] | None = None,
) -> None:
  """Writes the speed/accuracy frontier: exact match vs TPF and vs latency.

  Left: exact match against tokens per forward (machine-independent). Right,
  when the points carry `batch1_ms`: against measured batch-1 latency.

  Args:
    series: a model stage (e.g. "AR teacher", "SFT") -> its points, each a
      dict with `tokens_per_forward`, `exact_match`, `label` (e.g. the
      commit threshold) and optionally `batch1_ms`; a stage's points are
      joined in order of TPF.
    ceiling: the TPF ceiling of the prompts (a dashed line), or None.
    reference: a point drawn on the latency panel alone (Tunix's AR
      `Sampler`, whose TPF is the AR teacher's), with `label`, or None.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  timed = all("batch1_ms" in p for points in series.values() for p in points)
  fig, axes = plt.subplots(
      1, 2 if timed else 1, figsize=(13 if timed else 7, 5), squeeze=False
  )
  panels = [
      ("tokens_per_forward", "tokens per forward (higher: fewer forwards)")
  ]
  if timed:
    panels.append(
        ("batch1_ms", "batch-1 latency, ms per prompt (lower: faster)")
    )
  for ax, (key, xlabel) in zip(axes[0], panels):
    for stage, points in series.items():
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
    if key == "tokens_per_forward" and ceiling is not None:
      ax.axvline(
          ceiling, color="black", linestyle="--", linewidth=1,
          label=f"TPF ceiling {ceiling:.2f}",
      )  # fmt: skip
    if key == "batch1_ms" and reference is not None:
      ax.plot(
          reference["batch1_ms"],
          100 * reference["exact_match"],
          marker="*",
          markersize=12,
          linestyle="none",
          color="black",
          label=reference["label"],
      )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("exact match (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="best")
  fig.suptitle(title, fontsize=11)
  save_with_caption(
      fig, path, caption, rect=(0, 0.1, 1, 0.95), width=150 if timed else 110
  )
