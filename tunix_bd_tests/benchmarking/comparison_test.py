# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarking/comparison.py's headline and frontier, and the plot."""

import os

from absl.testing import absltest
from tunix_bd.benchmarking import comparison
from tunix_bd.evaluation import plot


def _row(method, threshold, exact, tpf, ms, rate):
  return dict(
      method=method,
      threshold=threshold,
      exact_match=exact,
      tokens_per_forward=tpf,
      batch1_ms=ms,
      batch1_speedup_vs_ar=3.0 / ms,
      tokens_per_s=rate,
      throughput_vs_ar=rate / 1000.0,
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
    self.assertEqual(
        comparison.frontier_reference(_rows([(0.5, 0.9)]))["batch1_ms"], 3.0
    )

  def test_plot_writes_a_png(self):
    path = os.path.join(self.create_tempdir().full_path, "frontier.png")
    rows = _rows([(0.5, 0.9), (0.9, 0.99)])
    plot.plot_frontier(
        comparison.frontier(rows),
        path,
        title="t",
        caption="c",
        ceiling=2.8,
        reference=comparison.frontier_reference(rows),
    )
    with open(path, "rb") as f:
      header = f.read(24)
    self.assertEqual(header[:8], b"\x89PNG\r\n\x1a\n")
    # Two panels (tokens per forward, and latency): 13 inches at 150 dpi.
    self.assertEqual(int.from_bytes(header[16:20], "big"), 1950)


if __name__ == "__main__":
  absltest.main()
