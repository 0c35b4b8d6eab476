# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The comparison as figures: speed relative to AR, and the frontier.

Both draw the spread over repeats where the rows carry it (`*_range`), fit
their axes to what they draw, and read only the row keys they plot.
"""

from __future__ import annotations

import io
import textwrap
from typing import Any, Sequence

from tunix_bd import files
from tunix_bd.evaluation import comparison

_AR_COLOR = "#7f7f7f"
_BD_COLOR = "#1f77b4"
# Label offsets (points) tried in turn until one overlaps no other label.
_OFFSETS = ((4, 4), (4, -12), (-4, 4), (-4, -12), (4, 14), (4, -22))


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  return plt


def _spread(row: dict[str, Any], key: str) -> tuple[float, float] | None:
  """`[min, max]` of `key` over repeats, if the row carries it."""
  spread = row.get(f"{key}_range")
  return None if spread is None else (spread[0], spread[1])


def _fit_right(ax, ends: Sequence[float], texts: Sequence[Any]) -> None:
  """Sets the x-axis to end where the last bar's label does, from 0: a
  label `w` pixels wide sits `pad` right of its bar's end, so the axis must
  reach `end * width / (width - pad - w)`."""
  renderer = ax.figure.canvas.get_renderer()
  width = ax.get_window_extent(renderer).width
  pad = 3 * ax.figure.dpi / 72
  need = [
      end * width / max(width - pad - t.get_window_extent(renderer).width, 1)
      for end, t in zip(ends, texts)
  ]
  ax.set_xlim(0, 1.02 * max(need + [1.05]))  # The 1x line stays in.


def plot_comparison(
    rows: Sequence[dict[str, Any]],
    path: str,
    *,
    batch_size: int,
    title: str,
    caption: str,
):
  """Writes the figure of `comparison_report.evaluate`'s rows to `path` (PNG).

  One bar per method in two panels, batch-1 speedup and batch-N throughput
  as ratios to the AR `Sampler`, each labelled with its ratio and its error
  bar reaching the ratio at every batch's slowest repeat; a method's name
  carries its exact match, tokens per forward and absolute speeds. Returns
  the (closed) figure.
  """
  plt = _pyplot()
  from matplotlib import lines  # pylint: disable=g-import-not-at-top
  from matplotlib import patches  # pylint: disable=g-import-not-at-top

  labels = [
      f"{r['method']}\n{r['exact_match']:.1%} exact,"
      f" {r['tokens_per_forward']:.2f} tokens/forward\n"
      f"{r['batch1_ms']:.2f} ms/prompt, {r['tokens_per_s']:,.0f} tokens/s"
      for r in rows
  ]
  colors = [
      _AR_COLOR if r["method"].startswith("AR") else _BD_COLOR for r in rows
  ]
  # Each panel: the ratio drawn, and the speed whose spread it shows.
  panels = (
      ("batch1_speedup_vs_ar", "batch 1: speed vs AR Sampler (latency)",
       "batch1_ms"),
      ("throughput_vs_ar", f"batch {batch_size}: throughput vs AR Sampler",
       "tokens_per_s"),
  )  # fmt: skip
  fig, axes = plt.subplots(
      1, 2, figsize=(11, 0.75 * len(rows) + 2.4), sharey=True
  )
  positions = list(range(len(rows)))[::-1]  # The reference on top.
  rect = (0, 0.08, 1, 0.92)
  bar_labels = []
  for ax, (key, panel_title, speed) in zip(axes, panels):
    values = [r[key] for r in rows]
    # The fastest repeats make the ratio; the slowest, its error bar's end.
    low = [
        v * (s[0] / s[1] if s and s[1] else 1.0)
        for v, s in zip(values, (_spread(r, speed) for r in rows))
    ]
    bars = ax.barh(
        positions,
        values,
        color=colors,
        height=0.6,
        xerr=[[v - l for v, l in zip(values, low)], [0] * len(values)],
        error_kw=dict(ecolor="black", capsize=3, linewidth=1),
    )
    # On a white box: a label never crosses the 1x line.
    bar_labels.append(
        ax.bar_label(
            bars,
            labels=[f"{v:.2f}x" for v in values],
            padding=3,
            fontsize=8,
            bbox=dict(facecolor="white", edgecolor="none", pad=1),
            zorder=3,
        )
    )
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1, zorder=2)
    ax.set_title(panel_title, fontsize=10)
    ax.set_xlabel("ratio to Tunix's AR Sampler (higher is faster)")
    ax.grid(axis="x", alpha=0.3)
  axes[0].set_yticks(positions, labels, fontsize=8)
  fig.suptitle(title, fontsize=12)
  # Above the panels, under the title: never over a bar.
  fig.legend(
      handles=[
          patches.Patch(color=_AR_COLOR, label="autoregressive"),
          patches.Patch(color=_BD_COLOR, label="block diffusion"),
          lines.Line2D([], [], color="black", linestyle="--", label="1x = AR"),
          lines.Line2D(
              [], [], color="black", marker="|", label="slowest of repeats"
          ),
      ],
      loc="upper center",
      bbox_to_anchor=(0.5, 0.95),
      ncol=4,
      fontsize=9,
      frameon=False,
  )
  fig.tight_layout(rect=rect)  # The axes' final widths, for the fit.
  for ax, (key, _, _), texts in zip(axes, panels, bar_labels):
    _fit_right(ax, [r[key] for r in rows], texts)
  return save_with_caption(fig, path, caption, rect=rect)


def save_with_caption(
    fig, path: str, caption: str, *, rect: tuple[float, float, float, float]
):
  """Lays `fig` out above a wrapped caption, writes it to `path` (a URL
  too) and closes it; returns it. `rect`: the `(left, bottom, right, top)`
  figure fraction the panels fill (the caption sits below `bottom`)."""
  plt = _pyplot()
  caption = "\n".join(textwrap.wrap(caption, 150))
  fig.text(0.01, 0.01, caption, fontsize=8, va="bottom")
  fig.tight_layout(rect=rect)
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=150)
  files.write_bytes(path, png.getvalue())
  plt.close(fig)
  return fig


def _label_points(ax, points: Sequence[tuple[float, float, str]]) -> None:
  """Labels points at the first offset that overlaps no label placed yet
  and stays inside the panel."""
  renderer = ax.figure.canvas.get_renderer()
  panel = ax.get_window_extent(renderer)
  placed = []
  for x, y, text in points:
    for dx, dy in _OFFSETS:
      note = ax.annotate(
          text,
          (x, y),
          textcoords="offset points",
          xytext=(dx, dy),
          ha="left" if dx > 0 else "right",
          fontsize=8,
      )
      box = note.get_window_extent(renderer)
      inside = panel.x0 <= box.x0 and box.x1 <= panel.x1
      if inside and not any(box.overlaps(other) for other in placed):
        break
      if (dx, dy) != _OFFSETS[-1]:
        note.remove()
    placed.append(box)


def _fit_speed_axis(ax, xs, sampler_x, sampler_y, unit) -> tuple:
  """Fits the x-axis to our decoders' points; the Sampler's point stays,
  at its place or, where it would squeeze ours into a sliver, at the axis
  edge with its value. Returns its point and label."""
  lo, hi = min(xs), max(xs)
  wide = max(hi, sampler_x) - min(lo, sampler_x)
  value = format(sampler_x, ",.2f" if unit == "ms" else ",.0f")
  label = f"Tunix Sampler, {value} {unit}"
  if hi - lo >= 0.4 * wide:
    lo, hi = min(lo, sampler_x), max(hi, sampler_x)
  pad = 0.08 * (hi - lo) or 0.05 * abs(hi) or 1.0
  ax.set_xlim(lo - pad, hi + pad)
  x = min(max(sampler_x, lo - pad / 2), hi + pad / 2)
  marker = "*" if x == sampler_x else (">" if x < sampler_x else "<")
  if x != sampler_x:
    label += " (off scale)"
  ax.plot(x, 100 * sampler_y, marker=marker, markersize=12,
          linestyle="none", color="black", label=label)  # fmt: skip
  return x, 100 * sampler_y, label.split(",")[0]


def plot_frontier(
    rows: Sequence[dict[str, Any]],
    path: str,
    *,
    batch_size: int,
    caption: str,
):
  """Writes the speed/accuracy frontier of `comparison_report.evaluate`'s rows.

  Exact match against tokens per forward (the TPF ceiling dashed), batch-1
  latency and batch-`batch_size` throughput (the AR `Sampler` a point of
  its own); each model stage's points (`comparison.frontier`) joined in
  order of TPF, the `comparison.recommended` one ringed. Returns the
  (closed) figure.
  """
  plt = _pyplot()
  ceiling = next(r["tpf_ceiling"] for r in rows if r["tpf_ceiling"] is not None)
  sampler = next(r for r in rows if r["method"] == comparison.AR_SAMPLER)
  best = comparison.recommended(rows)
  fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
  panels = (
      ("tokens_per_forward", "tokens per forward (higher: fewer forwards)",
       None),
      ("batch1_ms", "batch-1 latency, ms per prompt (lower: faster)", "ms"),
      ("tokens_per_s",
       f"batch-{batch_size} throughput, tokens/s (higher: faster)",
       "tokens/s"),
  )  # fmt: skip
  frontier = comparison.frontier(rows)
  labels = {ax: [] for ax in axes}
  for ax, (key, xlabel, unit) in zip(axes, panels):
    xs = []
    for stage, points in frontier.items():
      points = sorted(points, key=lambda p: p["tokens_per_forward"])
      x = [p[key] for p in points]
      y = [100 * p["exact_match"] for p in points]
      spreads = [_spread(p, key) for p in points]
      err = None
      if unit and all(spreads):
        err = [[xi - s[0] for xi, s in zip(x, spreads)],
               [s[1] - xi for xi, s in zip(x, spreads)]]  # fmt: skip
        xs += [v for s in spreads for v in s]
      ax.errorbar(x, y, xerr=err, marker="o", capsize=3, label=stage)
      xs += x
      # Points that coincide (thresholds that commit alike) share a label.
      merged = {}
      for p, xi, yi in zip(points, x, y):
        merged.setdefault((round(xi, 2), round(yi, 1)), []).append(p["label"])
      labels[ax] += [
          (xi, yi, ", ".join(sorted(n, key=lambda n: (len(n), n))))
          for (xi, yi), n in merged.items()
      ]
    ax.plot(
        best[key], 100 * best["exact_match"], marker="o", markersize=16,
        markerfacecolor="none", markeredgecolor="red", linestyle="none",
        label=f"recommended: threshold {best['threshold']} (headline)",
    )  # fmt: skip
    if unit is None:
      ax.axvline(
          ceiling, color="black", linestyle="--", linewidth=1,
          label=f"TPF ceiling {ceiling:.2f}",
      )  # fmt: skip
    else:
      labels[ax].append(
          _fit_speed_axis(ax, xs, sampler[key], sampler["exact_match"], unit)
      )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("exact match (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
  fig.suptitle(
      "Speed/accuracy frontier: exact match vs tokens per forward, batch-1"
      f" latency and batch-{batch_size} throughput",
      fontsize=11,
  )
  rect = (0, 0.1, 1, 0.95)
  fig.tight_layout(rect=rect)  # Labels are placed in final pixels.
  for ax, points in labels.items():
    _label_points(ax, points)
  return save_with_caption(fig, path, caption, rect=rect)
