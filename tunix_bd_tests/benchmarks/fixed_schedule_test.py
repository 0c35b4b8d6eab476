# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarks/fixed_schedule.py and bench_decode's random workload.

`bench_decode.py:realistic_tiny` runs the realistic workload's whole code
path (random Qwen3, Tunix's Sampler, our AR loop, `top_k` schedules,
roofline) at toy size.
"""

import contextlib
import dataclasses
import io

from absl.testing import absltest
from benchmarks import fixed_schedule
from benchmarks import plugin as benchmarks_plugin
from benchmarks.recipes import bench_decode


def _config(**overrides):
  config = benchmarks_plugin.get_config("bench_decode", "realistic_tiny")
  for key, value in overrides.items():
    config.workload_settings.realistic[key] = value
  return config


class RandomWorkloadTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.config = _config()
    # One batch size: the schedule is per row (the batch sweep, batch=1
    # and 2: quickstart_test's bench_decode run).
    cls.config.batch_sizes = (2,)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      cls.results = bench_decode.run(cls.config)
    cls.printed = printed.getvalue()

  def test_every_k_makes_exactly_k_tokens_per_forward(self):
    workload = self.results["workloads"]["realistic"]
    budget = self.config.workload_settings.realistic.max_new_tokens
    self.assertEqual(list(workload["cells"]), ["batch=2"])
    for batch, cells in workload["cells"].items():
      rows = int(batch.split("=")[1])
      self.assertEqual(
          list(cells),
          ["ar", "ar_loop"] + [f"bd_top{k}" for k in (1, 2, 4, 8)],
      )
      for name, cell in cells.items():
        # No stop id: every row decodes the whole budget.
        self.assertEqual(cell["new_tokens"], rows * budget, name)
        self.assertIsNone(cell["exact_match"])
        if name != "ar":  # Tunix's Sampler's program is not ours to split.
          # Measured inside its own program: below 1 by construction.
          self.assertLess(cell["forward_share"], 1.0)
      for k in (1, 2, 4, 8):
        cell = cells[f"bd_top{k}"]
        self.assertEqual(cell["tokens_per_forward"], k)
        self.assertEqual(cell["tpf_of_ceiling"], k / 8)
      self.assertEqual(cells["ar_loop"]["tokens_per_forward"], 1.0)
      self.assertAlmostEqual(cells["ar"]["speedup_vs_ar"], 1.0)
      self.assertAlmostEqual(cells["ar_loop"]["ideal_vs_ar_loop"], 1.0)
      self.assertIsNone(cells["ar"]["forward_share"])

  def test_prints_the_roofline_columns(self):
    header = self.printed.splitlines()[1].split()
    self.assertEqual(
        header,
        [
            "workload", "budget", "batch", "method", "tokens/s", "vs", "AR",
            "vs", "loop", "ideal", "fwd", "hbm", "tok/fwd", "ceil",
            "exact", "tokens",
        ],
    )  # fmt: skip
    self.assertIn(
        "realistic batch=2: a forward in its decoding program: ar_loop",
        self.printed,
    )


class FixedScheduleSettingsTest(absltest.TestCase):

  def test_an_unaligned_prompt_fails_naming_the_key(self):
    with self.assertRaisesRegex(ValueError, r"realistic\.prompt_length=9"):
      bench_decode.run(_config(prompt_length=9))

  def test_a_k_that_does_not_divide_the_block_fails(self):
    with self.assertRaisesRegex(ValueError, r"realistic\.top_k"):
      bench_decode.run(_config(top_k=(3,)))

  def test_a_vocabulary_smaller_than_the_tokenizers_fails(self):
    with self.assertRaisesRegex(ValueError, r"realistic\.vocab_size"):
      bench_decode.run(_config(vocab_size=64))

  def test_an_unknown_commit_rule_fails_before_compute(self):
    config = _config()
    config.rule = "nope"
    with self.assertRaisesRegex(ValueError, "rule, threshold, factor"):
      bench_decode.run(config)

  def test_an_omitted_key_takes_the_default(self):
    section = _config().workload_settings.realistic.to_dict()
    del section["seed"], section["model"]
    workload = fixed_schedule.FixedSchedule.from_section(section, "w")
    self.assertEqual(workload.seed, 0)
    self.assertEqual(workload.model.num_layers, 12)
    self.assertEqual(workload.vocab_size, 256)

  def test_a_partial_model_takes_the_realistic_models_other_keys(self):
    workload = fixed_schedule.FixedSchedule.from_section(
        {"model": {"num_layers": 2}}, "w"
    )
    self.assertEqual(
        workload.model,
        dataclasses.replace(fixed_schedule.FixedSchedule().model, num_layers=2),
    )
    with self.assertRaisesRegex(ValueError, r"unknown w\.model config keys"):
      fixed_schedule.FixedSchedule.from_section({"model": {"width": 2}}, "w")

  def test_an_unknown_key_or_kind_fails(self):
    section = _config().workload_settings.realistic.to_dict()
    with self.assertRaisesRegex(
        ValueError, r"unknown w config keys \['topk'\]"
    ):
      fixed_schedule.FixedSchedule.from_section(dict(section, topk=1), "w")
    with self.assertRaisesRegex(ValueError, r"^w\.kind must be 'random'"):
      fixed_schedule.FixedSchedule.from_section(dict(section, kind="x"), "w")

  def test_block_sizes(self):
    workload = fixed_schedule.FixedSchedule.from_section(
        _config().workload_settings.realistic, "w"
    )
    self.assertEqual(
        workload.block_sizes(),
        {"ar": 1, "ar_loop": 1, "bd_top1": 8, "bd_top2": 8, "bd_top4": 8,
         "bd_top8": 8},
    )  # fmt: skip


if __name__ == "__main__":
  absltest.main()
