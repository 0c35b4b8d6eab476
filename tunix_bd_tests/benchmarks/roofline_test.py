# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarks/roofline.py and benchmarks/decode_table.py."""

import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from benchmarks import chips
from benchmarks import decode_table
from benchmarks import roofline
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import speed
from tunix_bd.generate import denoise
from tunix_bd_tests import test_common


def _timing(tokens, forwards, seconds):
  return speed.Timing(
      texts=[""] * len(tokens),
      num_tokens=np.asarray(tokens),
      num_forwards=np.asarray(forwards),
      seconds=seconds,
  )


class ForwardBoundTest(absltest.TestCase):

  def test_each_batch_runs_its_slowest_rows_forwards(self):
    # Batches [3, 5], [2, 2], [7]: 5 + 2 + 7 forwards.
    got = roofline.forward_bound_seconds(np.array([3, 5, 2, 2, 7]), 2, 0.5)
    self.assertEqual(got, 7.0)


class ForwardSecondsTest(parameterized.TestCase):

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

  @parameterized.parameters(False, True)
  def test_forward_bytes_count_the_matrices_and_the_whole_cache(self, tied):
    config = test_common.tiny_qwen3_config(vocab_size=64, tied=tied)
    model = test_common.tiny_qwen3(vocab_size=64, tied=tied)
    d, f, v = config.embed_dim, config.hidden_dim, config.vocab_size
    h, kv, hd = config.num_heads, config.num_kv_heads, config.head_dim
    # By hand, float32: attention, its norms, the MLP, the layer norms.
    layer = (2 * d * h * hd + 2 * d * kv * hd) + 2 * hd + 3 * d * f + 2 * d
    # The final norm and the output head (the tied embedding, or lm_head).
    weights = config.num_layers * layer + d + d * v
    batch, cache = 3, 24
    cache_bytes = config.num_layers * 2 * batch * cache * kv * hd
    self.assertEqual(
        roofline.forward_bytes(roofline.Forward(model, batch, 1, cache, 8, 1)),
        4 * (weights + cache_bytes),
    )

  def test_the_hbm_bandwidth_is_known_by_device_kind(self):
    self.assertEqual(chips.HBM_BYTES_PER_S["TPU v5 lite"], 819e9)
    # This CPU has no HBM figure: the roofline column stays empty.
    self.assertIsNone(chips.hbm_bytes_per_s())
    self.assertIsNone(chips.peak_flops())

  def test_a_forward_that_overflows_the_cache_fails(self):
    model = test_common.tiny_qwen3(vocab_size=64)
    with self.assertRaisesRegex(ValueError, "cache_size"):
      roofline.Forward(model, 1, 8, 12, 8, block_size=8)


class EngineTest(absltest.TestCase):

  def test_twins_keep_the_rules_schedule_and_stop_after_one_block(self):
    model = test_common.tiny_qwen3(vocab_size=64)
    config = denoise.DenoiseConfig(
        max_new_tokens=8,
        max_prompt_length=4,
        stop_ids=(1,),
        pad_id=0,
        rule="top_k",
        top_k=2,
    )
    runs, stops = roofline.engine_decoders(
        model,
        tokenizer_lib.build_char_tokenizer(),
        bd=bd_config_lib.BlockDiffusionConfig(4, mask_token_id=63),
        config=config,
    )
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12]]
    # Two blocks of 4 at 2 commits a step, the whole budget.
    out = runs(prompts)
    np.testing.assert_array_equal(out.num_forwards, [4, 4])
    np.testing.assert_array_equal(out.num_tokens, [8, 8])
    # Its first token is a stop id: the rows end with their first block.
    out = stops(prompts)
    np.testing.assert_array_equal(out.num_forwards, [2, 2])
    np.testing.assert_array_equal(out.num_tokens, [0, 0])

  def test_engine_time_follows_the_loops_iterations(self):
    runs = _timing([8, 8], [4, 4], 0.4)
    stops = _timing([0, 0], [2, 2], 0.3)
    # Batch 2: 4 and 2 iterations; 0.05 s more per iteration.
    method = _timing([6, 6], [3, 2], 9.0)
    self.assertAlmostEqual(
        roofline.engine_seconds(method, (runs, stops), 2), 0.35
    )
    # Batch 1: 5 iterations, where the twins ran 8 and 4.
    self.assertAlmostEqual(
        roofline.engine_seconds(method, (runs, stops), 1), 0.325
    )
    # The twins' own schedule, or no stopping twin: the running twin's time.
    self.assertEqual(roofline.engine_seconds(runs, (runs, stops), 2), 0.4)
    self.assertEqual(roofline.engine_seconds(method, (runs, None), 2), 0.4)


class CellsTest(absltest.TestCase):

  def test_roofline_columns_follow_from_forwards_and_engine_time(self):
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
        engine={"ar_loop": 0.4, "bd_cached": 0.2},
        ceilings={1: 0.8, 8: 4.0},
        batch_size=1,
        hbm_seconds={1: 0.004, 8: 0.005},
    )
    loop, bd = cells["ar_loop"], cells["bd_cached"]
    # The HBM-bound time of the forwards over the measured time.
    self.assertAlmostEqual(loop["hbm_share"], 10 * 0.004 / 0.5)
    self.assertAlmostEqual(bd["hbm_share"], 4 * 0.005 / 0.25)
    # The time outside the engine, over the time: fractions.
    self.assertAlmostEqual(loop["forward_share"], 0.1 / 0.5)
    self.assertAlmostEqual(bd["forward_share"], 0.05 / 0.25)
    # Tokens over the forwards' time: 8 / 0.05 over 8 / 0.1.
    self.assertAlmostEqual(bd["ideal_vs_ar_loop"], 2.0)
    self.assertAlmostEqual(bd["speedup_vs_ar_loop"], 2.0)
    self.assertAlmostEqual(loop["ideal_vs_ar_loop"], 1.0)
    self.assertAlmostEqual(bd["tpf_of_ceiling"], 2.0 / 4.0)
    self.assertAlmostEqual(loop["tpf_of_ceiling"], 0.8 / 0.8)
    self.assertAlmostEqual(bd["exact_match"], 0.5)
    # Tunix's Sampler is not split, the cache-free method has no HBM bound.
    self.assertIsNone(cells["ar"]["forward_share"])
    self.assertIsNone(cells["ar"]["ideal_vs_ar_loop"])
    self.assertAlmostEqual(cells["ar"]["hbm_share"], 10 * 0.004 / 1.0)
    free = cells["bd_cache_free"]
    self.assertIsNone(free["ideal_vs_ar_loop"])
    self.assertIsNone(free["hbm_share"])
    self.assertAlmostEqual(free["tpf_of_ceiling"], 0.5)
    # vs loop over ideal is no fraction (the ratio of two forward shares),
    # so no cell carries it.
    for cell in cells.values():
      self.assertNotIn("efficiency", cell)

  def test_a_method_without_tokens_has_no_ideal(self):
    # An under-trained model may answer with the stop token alone.
    timings = {m: _timing([0, 0], [1, 1], 0.1) for m in ("ar", "ar_loop")}
    timings["bd_cached"] = _timing([0, 0], [1, 1], 0.1)
    cells = decode_table.cells(
        timings,
        correct=None,
        blocks={"ar": 1, "ar_loop": 1, "bd_cached": 8},
        cached={m: True for m in timings},
        engine={"ar_loop": 0.05, "bd_cached": 0.05},
        ceilings={1: 0.0, 8: 0.0},
        batch_size=1,
    )
    self.assertAlmostEqual(cells["bd_cached"]["ideal_vs_ar_loop"], 0.0)
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
        engine={"ar_loop": 0.7},
        ceilings={1: 2 / 3},
        batch_size=1,
    )
    results = {
        "workloads": {
            "w": {
                "max_new_tokens": 4,
                "block_size": 1,
                "cells": {"batch=1": cells},
                "forward_seconds": {"batch=1": {"ar_loop": 0.1}},
                "tpf_ceiling": {1: 2 / 3},
            }
        }
    }
    table = decode_table.format_table(results, "title").splitlines()
    header = table[1].split()
    for column in ("ideal", "fwd", "hbm", "ceil", "tok/fwd", "exact"):
      self.assertIn(column, header)
    self.assertNotIn("eff", header)
    # This CPU's HBM bandwidth is unknown: the title says so.
    self.assertIn("no HBM bandwidth known for 'cpu'", table[0])
    self.assertIn("100%", table[2])  # ceil: 2/3 of 2/3.
    self.assertIn("-", table[2].split())  # No exact match without answers.
    self.assertIn("in its decoding program: ar_loop 100000 us", table[4])


if __name__ == "__main__":
  absltest.main()
