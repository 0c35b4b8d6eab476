# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarks/decode_bench_settings.py: `bench_decode`, checked first.

Every check runs before any compute: these configs name checkpoints that
are real directories only where a test needs them to be.
"""

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import decode_bench_settings
from benchmarks import fixed_schedule
from benchmarks import plugin as benchmarks_plugin


def _config(**overrides):
  config = benchmarks_plugin.get_config("bench_decode", "tiny")
  config.update(overrides)
  return config


class DecodeBenchSettingsTest(parameterized.TestCase):

  def test_the_config_states_only_what_it_changes(self):
    defaults = decode_bench_settings.DecodeBenchSettings()
    config = benchmarks_plugin.get_config("bench_decode")
    for name in ("num_prompts", "batch_sizes", "rule", "threshold", "output"):
      self.assertEqual(config[name], getattr(defaults, name), name)

  def test_an_omitted_key_takes_the_default(self):
    config = _config()
    del config["factor"]
    directory = self.create_tempdir().full_path
    config.workload_settings.short.update(
        ar_checkpoint=directory, bd_checkpoint=directory
    )
    bench = decode_bench_settings.validate(config)
    self.assertEqual(bench.settings.factor, 1.0)
    self.assertIsNone(bench.peer)
    self.assertEqual(
        bench.workloads["short"],
        decode_bench_settings.TrainedWorkload(
            max_new_tokens=8, ar_checkpoint=directory, bd_checkpoint=directory
        ),
    )

  @parameterized.named_parameters(
      ("num_prompts", dict(num_prompts=0), r"^num_prompts must be >= 1"),
      ("repeats", dict(repeats=0), r"^repeats must be >= 1"),
      ("batch_sizes", dict(batch_sizes=(0,)), r"^batch_sizes must be ints"),
      ("batch_vs_prompts", dict(batch_sizes=(8,)), r"exceeds num_prompts=4"),
      ("rule", dict(rule="nope"), r"^rule, threshold, factor: "),
      ("threshold", dict(threshold=2.0), r"^rule, threshold, factor: "),
      ("workloads", dict(workloads=("nope",)), r"^workloads must name"),
      ("no_workloads", dict(workloads=()), r"^workloads must name"),
  )
  def test_a_bad_value_names_its_key(self, overrides, error):
    with self.assertRaisesRegex(ValueError, error):
      decode_bench_settings.validate(_config(**overrides))

  def test_the_factor_rule_carries_its_factor(self):
    settings = decode_bench_settings.DecodeBenchSettings(
        rule="factor", factor=2.0
    )
    self.assertEqual(settings.commit_rule(), dict(rule="factor", factor=2.0))
    self.assertEqual(
        settings.title(),
        "Decode benchmark: 64 eval prompts per trained workload, rule factor"
        " 2.0",
    )

  def test_an_unwritable_output_fails_first(self):
    output = self.create_tempdir().full_path  # A directory.
    with self.assertRaisesRegex(ValueError, r"^output="):
      decode_bench_settings.validate(_config(output=output, num_prompts=0))


class WorkloadTest(parameterized.TestCase):

  def test_a_missing_checkpoint_names_its_key(self):
    config = _config()
    config.workload_settings.short.bd_checkpoint = "no/such/dir"
    config.workload_settings.short.ar_checkpoint = (
        self.create_tempdir().full_path
    )
    with self.assertRaisesRegex(
        ValueError,
        r"^workload_settings\.short\.bd_checkpoint='no/such/dir' is not a"
        r" directory; run `quickstart.py`",
    ):
      decode_bench_settings.validate(config)

  def test_every_value_is_checked_before_the_directories(self):
    config = _config(workloads=("short", "long"))
    config.workload_settings.short.bd_checkpoint = "no/such/dir"
    config.workload_settings.long.tasks = ("nope",)
    with self.assertRaisesRegex(ValueError, r"^workload_settings\.long\.tasks"):
      decode_bench_settings.validate(config)

  def test_only_the_named_workloads_are_read(self):
    config = _config()
    config.workload_settings.long.tasks = ("nope",)
    directory = self.create_tempdir().full_path
    config.workload_settings.short.update(
        ar_checkpoint=directory, bd_checkpoint=directory
    )
    self.assertEqual(
        list(decode_bench_settings.validate(config).workloads), ["short"]
    )

  @parameterized.named_parameters(
      ("task", dict(tasks=("nope",)), r"^w\.tasks has unknown task"),
      ("budget", dict(max_new_tokens=0), r"^w\.max_new_tokens must be >= 1"),
      ("typo", dict(max_new_token=8), r"unknown w config keys"),
  )
  def test_a_bad_trained_workload_names_its_key(self, overrides, error):
    section = _config().workload_settings.short
    section.update(overrides)
    with self.assertRaisesRegex(ValueError, error):
      decode_bench_settings.workload(section, "w")

  def test_a_random_workload_is_a_fixed_schedule(self):
    config = benchmarks_plugin.get_config("bench_decode", "realistic_tiny")
    bench = decode_bench_settings.validate(config)
    self.assertIsInstance(
        bench.workloads["realistic"], fixed_schedule.FixedSchedule
    )


if __name__ == "__main__":
  absltest.main()
