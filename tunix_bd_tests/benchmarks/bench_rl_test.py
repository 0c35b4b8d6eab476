# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`bench_rl`: the table's structure, not its timing; bad configs."""

from benchmarks import plugin as benchmarks_plugin
import contextlib
import io
import json
import os

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import step_phases
from benchmarks.recipes import bench_rl
from tunix_bd.core import canvases


def _smoke(workdir: str):
  config = benchmarks_plugin.get_config("bench_rl", "smoke")
  config.workdir = workdir
  return config


class SmokeTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tmp = absltest.get_default_test_tmpdir()
    cls.workdir = os.path.join(tmp, "bench_rl")
    cls.config = _smoke(cls.workdir)
    # `output`, as bench_sft's and bench_decode's: the report goes there.
    cls.config.output = os.path.join(tmp, "out", "rl.json")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      cls.summary = bench_rl.run(cls.config)
    cls.printed = printed.getvalue()

  def test_every_phase_of_both_arms_is_timed_each_round(self):
    seconds = self.summary["seconds"]
    self.assertEqual(set(seconds), set(step_phases.ARMS))
    for arm in step_phases.ARMS:
      self.assertEqual(tuple(seconds[arm]), step_phases.PHASES)
      for phase, times in seconds[arm].items():
        self.assertLen(times, self.config.bench.repeats, f"{arm} {phase}")
        self.assertTrue(all(t > 0 for t in times), f"{arm} {phase}")

  def test_medians_ratios_and_step_agree(self):
    phases = self.summary["phases"]
    self.assertEqual(tuple(phases), step_phases.PHASES)
    for phase, row in phases.items():
      for arm in step_phases.ARMS:
        times = sorted(self.summary["seconds"][arm][phase])
        self.assertBetween(row[f"{arm}_s"], times[0], times[-1])
      self.assertAlmostEqual(row["ratio"], row["diffusion_s"] / row["ar_s"])
    step = self.summary["step"]
    for arm in step_phases.ARMS:
      self.assertAlmostEqual(
          step[f"{arm}_s"], sum(r[f"{arm}_s"] for r in phases.values())
      )
    self.assertAlmostEqual(step["ratio"], step["diffusion_s"] / step["ar_s"])

  def test_replay_layout_counts_the_warm_up_trace(self):
    replay = self.summary["replay"]
    budget = self.config.rollout.max_new_tokens
    # At least one canvas; at most one per action.
    self.assertBetween(replay["max_canvases_per_row"], 1, budget)
    self.assertGreaterEqual(replay["canvases_per_group"], 1)
    # The context is whole blocks, at most the prompt and completion widths.
    size = self.config.model.scratch_bd.block_size
    context = replay["context_positions"]
    self.assertEqual(context % size, 0)
    width = self.config.rollout.max_prompt_length + budget
    self.assertBetween(context, size, -(-width // size) * size)
    bucket = canvases.canvas_bucket(replay["max_canvases_per_row"], size)
    self.assertEqual(replay["tokens_per_row"], context + bucket * size)

  def test_rollouts_stay_within_the_token_budget(self):
    budget = self.config.rollout.max_new_tokens
    for arm in step_phases.ARMS:
      length = self.summary["mean_completion_length"][arm]
      self.assertBetween(length, 0, budget)
    # A forward commits at most a block.
    tokens_per_forward = self.summary["tokens_per_forward"]
    self.assertGreater(tokens_per_forward, 0.0)
    self.assertLessEqual(
        tokens_per_forward, self.config.model.scratch_bd.block_size
    )

  def test_prints_the_table_and_writes_the_json(self):
    lines = self.printed.splitlines()
    self.assertIn("G=4", lines[0])
    self.assertEqual(
        lines[1].split(), ["phase", "diffusion", "s", "AR", "s", "ratio"]
    )
    rows = len(step_phases.PHASES) + 1
    names = [line.split()[0] for line in lines[2 : 2 + rows]]
    self.assertEqual(names, [*step_phases.PHASES, "step"])
    self.assertIn("tokens per forward", lines[2 + rows])
    replay = self.summary["replay"]
    self.assertIn(
        f"at most {replay['max_canvases_per_row']} canvases", lines[-1]
    )
    self.assertIn(f"{replay['tokens_per_row']} tokens a row", lines[-1])
    with open(self.config.output) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(self.summary)))
    # Written there instead of under the workdir (the default).
    self.assertFalse(os.path.exists(self.workdir))


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("repeats", dict(bench=dict(repeats=0)), r"bench\.repeats"),
      (
          "learning_rate",
          dict(bench=dict(learning_rate=-1.0)),
          r"bench\.learning_rate",
      ),
      ("rollout_key", dict(rollout=dict(top_p=0.9)), "rollout config keys"),
      ("generations", dict(grpo=dict(num_generations=1)), "num_generations"),
      (
          "checkpoint",
          dict(model=dict(random_init=False, checkpoint="no/such/dir")),
          r"model\.checkpoint='no/such/dir'",
      ),
  )
  def test_fails_closed_before_any_compute(self, overrides, message):
    workdir = os.path.join(self.create_tempdir().full_path, "bench")
    config = _smoke(workdir)
    for key, value in overrides.items():
      if isinstance(value, dict):
        config[key].update(value)
      else:
        config[key] = value
    with self.assertRaisesRegex(ValueError, message):
      bench_rl.run(config)
    self.assertFalse(os.path.exists(workdir))

  def test_an_output_that_cannot_be_written_fails_before_compute(self):
    workdir = os.path.join(self.create_tempdir().full_path, "bench")
    config = _smoke(workdir)
    config.output = self.create_tempdir().full_path  # A directory.
    with self.assertRaisesRegex(ValueError, r"^output=.* is a directory"):
      bench_rl.run(config)
    self.assertFalse(os.path.exists(workdir))

  def test_a_directory_without_a_model_is_refused(self):
    workdir = os.path.join(self.create_tempdir().full_path, "bench")
    empty = self.create_tempdir().full_path
    config = _smoke(workdir)
    config.model.update(
        random_init=False, checkpoint=empty, ar_checkpoint=empty
    )
    with self.assertRaisesRegex(
        ValueError, r"model\.checkpoint=.* is not a model directory"
    ):
      bench_rl.run(config)
    self.assertFalse(os.path.exists(workdir))


if __name__ == "__main__":
  absltest.main()
