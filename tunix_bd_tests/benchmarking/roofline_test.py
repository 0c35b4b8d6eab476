# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/roofline.py and evaluation/decode_table.py."""

import itertools
import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.benchmarking import decode_table
from tunix_bd.benchmarking import roofline
from tunix_bd.benchmarking import speed
from tunix_bd_tests import test_common


def _touched_blocks(prompt, answer, stopped, size):
  """Brute force: the distinct blocks of the answer's (and stop's) slots."""
  slots = range(prompt, prompt + answer + int(stopped))
  return len({position // size for position in slots})


def _timing(tokens, forwards, seconds):
  return speed.Timing(
      texts=[""] * len(tokens),
      num_tokens=np.asarray(tokens),
      num_forwards=np.asarray(forwards),
      seconds=seconds,
      repeat_seconds=[seconds],
  )


class TpfCeilingTest(parameterized.TestCase):

  @parameterized.parameters(1, 3, 4, 8)
  def test_matches_counting_the_touched_blocks(self, size):
    rows = list(itertools.product(range(1, 10), range(1, 12), (True, False)))
    prompts, answers, stopped = (list(x) for x in zip(*rows))
    want = np.mean([n / _touched_blocks(p, n, s, size) for p, n, s in rows])
    got = roofline.tpf_ceiling(prompts, answers, size, stopped=stopped)
    self.assertAlmostEqual(got, want, places=12)

  def test_one_token_blocks_cost_a_forward_per_token_and_stop(self):
    self.assertAlmostEqual(roofline.tpf_ceiling([5, 9], [4, 1], 1), 0.65)

  def test_default_is_every_row_stopped(self):
    self.assertEqual(
        roofline.tpf_ceiling([8], [8], 8),
        roofline.tpf_ceiling([8], [8], 8, stopped=[True]),
    )
    self.assertEqual(roofline.tpf_ceiling([8], [8], 8), 4.0)
    self.assertEqual(roofline.tpf_ceiling([8], [8], 8, stopped=[False]), 8.0)


class ForwardBoundTest(absltest.TestCase):

  def test_each_batch_runs_its_slowest_rows_forwards(self):
    # Batches [3, 5], [2, 2], [7]: 5 + 2 + 7 forwards.
    got = roofline.forward_bound_seconds(np.array([3, 5, 2, 2, 7]), 2, 0.5)
    self.assertEqual(got, 7.0)


class ForwardSecondsTest(absltest.TestCase):

  def test_a_block_costs_a_finite_positive_time(self):
    model = test_common.tiny_qwen3(vocab_size=64)
    costs = roofline.forward_seconds(
        [
            roofline.Forward(model, 2, width, 24, 8, block_size=width)
            for width in (1, 4)
        ],
        repeats=1,
    )
    self.assertLen(costs, 2)
    for seconds in costs:
      self.assertTrue(math.isfinite(seconds))
      self.assertGreater(seconds, 0.0)

  def test_a_forward_that_overflows_the_cache_fails(self):
    model = test_common.tiny_qwen3(vocab_size=64)
    with self.assertRaisesRegex(ValueError, "cache_size"):
      roofline.Forward(model, 1, 8, 12, 8, block_size=8)


class CellsTest(absltest.TestCase):

  def test_roofline_columns_follow_from_forwards_and_costs(self):
    timings = {
        # 2 rows of 4 tokens each; seconds over both batches of batch 1.
        "ar": _timing([4, 4], [5, 5], 1.0),
        "ar_loop": _timing([4, 4], [5, 5], 0.5),
        "bd_cache_free": _timing([4, 4], [2, 2], 2.0),
        "bd_cached": _timing([4, 4], [2, 2], 0.25),
    }
    blocks = {"ar": 1, "ar_loop": 1, "bd_cache_free": 8, "bd_cached": 8}
    cells = decode_table.cells(
        timings,
        correct={m: [True, False] for m in timings},
        blocks=blocks,
        cached={m: m != "bd_cache_free" for m in timings},
        costs={1: 0.01, 8: 0.02},
        ceilings={1: 0.8, 8: 4.0},
        batch_size=1,
    )
    loop, bd = cells["ar_loop"], cells["bd_cached"]
    self.assertAlmostEqual(loop["forward_share"], 10 * 0.01 / 0.5)
    self.assertAlmostEqual(bd["forward_share"], 4 * 0.02 / 0.25)
    # (8 / (4 * 0.02)) / (8 / (10 * 0.01)) = TPF ratio 2.5 x cost ratio 0.5.
    self.assertAlmostEqual(bd["ideal_vs_ar_loop"], 1.25)
    self.assertAlmostEqual(bd["speedup_vs_ar_loop"], 2.0)
    self.assertAlmostEqual(bd["efficiency"], 2.0 / 1.25)
    self.assertAlmostEqual(loop["efficiency"], 1.0)
    self.assertAlmostEqual(bd["tpf_of_ceiling"], 2.0 / 4.0)
    self.assertAlmostEqual(loop["tpf_of_ceiling"], 0.8 / 0.8)
    self.assertAlmostEqual(bd["exact_match"], 0.5)
    free = cells["bd_cache_free"]
    self.assertIsNone(free["ideal_vs_ar_loop"])
    self.assertIsNone(free["efficiency"])
    self.assertAlmostEqual(free["tpf_of_ceiling"], 0.5)

  def test_a_method_without_tokens_has_no_efficiency(self):
    # An under-trained model may answer with the stop token alone.
    timings = {m: _timing([0, 0], [1, 1], 0.1) for m in ("ar", "ar_loop")}
    timings["bd_cached"] = _timing([0, 0], [1, 1], 0.1)
    cells = decode_table.cells(
        timings,
        correct=None,
        blocks={"ar": 1, "ar_loop": 1, "bd_cached": 8},
        cached={m: True for m in timings},
        costs={1: 0.01, 8: 0.02},
        ceilings={1: 0.0, 8: 0.0},
        batch_size=1,
    )
    self.assertIsNone(cells["bd_cached"]["efficiency"])
    self.assertIsNone(cells["bd_cached"]["tpf_of_ceiling"])

  def test_table_has_the_roofline_and_ceiling_columns(self):
    timings = {
        "ar": _timing([2], [3], 1.0),
        "ar_loop": _timing([2], [3], 1.0),
    }
    cells = decode_table.cells(
        timings,
        correct=None,
        blocks={"ar": 1, "ar_loop": 1},
        cached={"ar": True, "ar_loop": True},
        costs={1: 0.1},
        ceilings={1: 2 / 3},
        batch_size=1,
    )
    results = {
        "workloads": {
            "w": {
                "max_new_tokens": 4,
                "block_size": 1,
                "cells": {"batch=1": cells},
                "forward_seconds": {"batch=1": {1: 0.1}},
                "tpf_ceiling": {1: 2 / 3},
            }
        }
    }
    table = decode_table.format_table(results, "title").splitlines()
    header = table[1].split()
    for column in ("ideal", "eff", "fwd", "ceil", "tok/fwd", "exact"):
      self.assertIn(column, header)
    self.assertIn("100%", table[2])  # ceil: 2/3 of 2/3.
    self.assertIn("-", table[2].split())  # No exact match without answers.
    self.assertIn("one cached forward 100000 us", table[4])


if __name__ == "__main__":
  absltest.main()
