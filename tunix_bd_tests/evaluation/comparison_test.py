# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/comparison.py's headline and frontier, and the plot."""

import itertools
import os

from absl.testing import absltest
from absl.testing import parameterized
from matplotlib.backends import backend_agg
import numpy as np
from tunix_bd.evaluation import comparison
from tunix_bd.evaluation import plot


def _row(method, threshold, exact, tpf, ms, rate):
  return dict(
      method=method,
      threshold=threshold,
      exact_match=exact,
      final_answer=exact,
      tokens_per_forward=tpf,
      batch1_ms=ms,
      batch1_ms_per_forward=ms / 10,
      batch1_speedup_vs_ar=3.0 / ms,
      tokens_per_s=rate,
      throughput_vs_ar=rate / 1000.0,
      tokens_per_s_at={},
      tpf_ceiling=None if threshold is None else 2.8,
  )


def _rows(exacts):
  rows = [
      _row(comparison.AR_SAMPLER, None, 1.0, 0.8, 3.0, 1000.0),
      _row(comparison.AR_LOOP, None, 1.0, 0.8, 1.2, 1200.0),
  ]
  # Lower thresholds: faster, less accurate.
  for (threshold, exact), ms in zip(exacts, (0.8, 0.9, 1.0)):
    rows.append(
        _row(comparison.threshold_method(threshold), threshold, exact, 2.5,
             ms, 900.0)
    )  # fmt: skip
  return rows


def _quickstart_rows():
  """The quickstart's rows of docs/results.md, with a spread over repeats
  and a key the plots do not read."""
  rows = []
  for method, threshold, exact, tpf, ms, rate in (
      (comparison.AR_SAMPLER, None, 1.0, 0.77, 3.52, 16663.0),
      (comparison.AR_LOOP, None, 1.0, 0.77, 1.19, 20350.0),
      ("BD threshold 0.5", 0.5, 0.941, 2.80, 0.94, 23996.0),
      ("BD threshold 0.7", 0.7, 0.977, 2.69, 1.02, 16136.0),
      ("BD threshold 0.9", 0.9, 0.988, 2.60, 0.98, 15131.0),
      ("BD threshold 0.99", 0.99, 0.988, 2.30, 1.00, 12842.0),
  ):
    row = _row(method, threshold, exact, tpf, ms, rate)
    row.update(
        batch1_speedup_vs_ar=3.52 / ms,
        throughput_vs_ar=rate / 16663.0,
        batch1_ms_range=[ms, 1.25 * ms],
        tokens_per_s_range=[0.8 * rate, rate],
        num_params=123,
    )
    rows.append(row)
  return rows


class HeadlineTest(absltest.TestCase):

  def test_quotes_the_fastest_threshold_within_a_point_of_ar(self):
    text = comparison.headline(
        _rows([(0.5, 0.95), (0.7, 0.991), (0.9, 1.0)]), batch_size=64
    )
    self.assertIn("threshold 0.7:", text)
    self.assertIn("Batch-1 latency 0.90 ms per prompt", text)
    self.assertIn("1.33x our AR loop", text)  # 1.2 / 0.9.
    self.assertIn("Batch 64 throughput 900 tokens/s", text)
    self.assertIn("0.75x our AR loop", text)  # 900 / 1200.
    self.assertIn("Block diffusion is for latency", text)

  def test_quotes_the_most_accurate_if_none_is_within_a_point(self):
    text = comparison.headline(
        _rows([(0.5, 0.90), (0.7, 0.95), (0.9, 0.97)]), batch_size=64
    )
    self.assertIn("threshold 0.9:", text)


class FrontierTest(absltest.TestCase):

  def test_one_point_for_ar_and_one_per_threshold(self):
    series = comparison.frontier(_rows([(0.5, 0.9), (0.9, 0.99)]))
    self.assertEqual(list(series), ["AR teacher", "block-diffusion SFT"])
    self.assertEqual(
        [p["label"] for p in series["AR teacher"]], ["AR, our loop"]
    )
    self.assertEqual(
        [p["label"] for p in series["block-diffusion SFT"]], ["0.5", "0.9"]
    )
    self.assertEqual(series["block-diffusion SFT"][1]["exact_match"], 0.99)
    # Each point carries its measured latency, for the second panel.
    self.assertEqual(series["AR teacher"][0]["batch1_ms"], 1.2)

  def test_plot_writes_a_png(self):
    path = os.path.join(self.create_tempdir().full_path, "frontier.png")
    rows = _rows([(0.5, 0.9), (0.9, 0.99)])
    plot.plot_frontier(rows, path, batch_size=64, caption="c")
    with open(path, "rb") as f:
      header = f.read(24)
    self.assertEqual(header[:8], b"\x89PNG\r\n\x1a\n")
    # Three panels (tokens per forward, latency, throughput): 18 inches at
    # 150 dpi.
    self.assertEqual(int.from_bytes(header[16:20], "big"), 2700)


class PlotTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.rows = _quickstart_rows()
    tmp = absltest.get_default_test_tmpdir()
    cls.frontier = plot.plot_frontier(
        cls.rows, os.path.join(tmp, "f.png"), batch_size=64, caption="c"
    )
    cls.report = plot.plot_comparison(
        cls.rows, os.path.join(tmp, "r.png"), batch_size=64, title="t",
        caption="c",
    )  # fmt: skip

  def test_frontier_has_a_batch_n_panel_and_rings_the_headlines_threshold(
      self,
  ):
    axes = self.frontier.axes
    self.assertEqual(
        [ax.get_xlabel().split(",")[0] for ax in axes],
        ["tokens per forward (higher: fewer forwards)", "batch-1 latency",
         "batch-64 throughput"],
    )  # fmt: skip
    for ax in axes:
      legend = [t.get_text() for t in ax.get_legend().get_texts()]
      self.assertIn("recommended: threshold 0.9 (headline)", legend)

  def test_frontier_labels_never_overlap_and_the_sampler_has_one(self):
    # Closed: a canvas of its own to measure the labels as drawn.
    renderer = backend_agg.FigureCanvasAgg(self.frontier).get_renderer()
    for ax in self.frontier.axes:
      notes = [t for t in ax.texts if t.get_text()]
      boxes = [t.get_window_extent(renderer) for t in notes]
      for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
          self.assertFalse(a.overlaps(b), [t.get_text() for t in notes])
    for ax in self.frontier.axes[1:]:
      self.assertIn("Tunix Sampler", [t.get_text() for t in ax.texts])

  def test_frontier_speed_axes_spread_our_points_with_error_bars(self):
    for ax, key in zip(self.frontier.axes[1:], ("batch1_ms", "tokens_per_s")):
      # Fit to our decoders' points and spreads, not stretched to the
      # Sampler's 3.52 ms (drawn at the edge, labelled).
      ours = [
          x
          for r in self.rows
          if r["method"] != comparison.AR_SAMPLER
          for x in r[f"{key}_range"]
      ]
      low, high = ax.get_xlim()
      self.assertLess(high - low, 1.2 * (max(ours) - min(ours)))
      # Error bars: each line's points carry horizontal bars.
      self.assertLen(ax.containers, 2)
      for container in ax.containers:
        self.assertTrue(container.has_xerr)

  def test_report_axes_end_near_the_bars_and_show_the_spread(self):
    for ax, key in zip(
        self.report.axes, ("batch1_speedup_vs_ar", "throughput_vs_ar")
    ):
      longest = max(r[key] for r in self.rows)
      # Room for a short label, not twice the bar.
      self.assertBetween(ax.get_xlim()[1], longest, 1.3 * longest)
      (bars,) = [c for c in ax.containers if hasattr(c, "errorbar")]
      self.assertIsNotNone(bars.errorbar)
      # The slowest repeat's ratio: 1 / 1.25 and 0.8 of the bar.
      segments = bars.errorbar.lines[2][0].get_segments()
      lows = sorted(min(s[:, 0]) / max(s[:, 0]) for s in segments)
      np.testing.assert_allclose(lows, [0.8] * len(self.rows))


def _touched_blocks(prompt, answer, stopped, size):
  """Brute force: the distinct blocks of the answer's (and stop's) slots."""
  slots = range(prompt, prompt + answer + int(stopped))
  return len({position // size for position in slots})


class TpfCeilingTest(parameterized.TestCase):

  @parameterized.parameters(1, 3, 4, 8)
  def test_matches_counting_the_touched_blocks(self, size):
    rows = list(itertools.product(range(1, 10), range(1, 12), (True, False)))
    prompts, answers, stopped = (list(x) for x in zip(*rows))
    want = np.mean([n / _touched_blocks(p, n, s, size) for p, n, s in rows])
    got = comparison.tpf_ceiling(prompts, answers, size, stopped=stopped)
    self.assertAlmostEqual(got, want, places=12)

  def test_one_token_blocks_cost_a_forward_per_token_and_stop(self):
    self.assertAlmostEqual(comparison.tpf_ceiling([5, 9], [4, 1], 1), 0.65)

  def test_default_is_every_row_stopped(self):
    self.assertEqual(
        comparison.tpf_ceiling([8], [8], 8),
        comparison.tpf_ceiling([8], [8], 8, stopped=[True]),
    )
    self.assertEqual(comparison.tpf_ceiling([8], [8], 8), 4.0)
    self.assertEqual(comparison.tpf_ceiling([8], [8], 8, stopped=[False]), 8.0)


if __name__ == "__main__":
  absltest.main()
