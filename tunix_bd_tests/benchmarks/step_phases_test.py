# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`step_phases`: interleaved rounds, warm-up dropped; medians and the table."""

from absl.testing import absltest
from benchmarks import step_phases


class TimeRoundsTest(absltest.TestCase):

  def test_phases_alternate_arms_and_warmup_is_dropped(self):
    calls = []
    arms = {
        arm: step_phases.Arm(
            phases={
                p: lambda a=arm, p=p: calls.append((a, p))
                for p in step_phases.PHASES
            },
            visible_lengths=[5],
        )
        for arm in step_phases.ARMS
    }
    seconds = step_phases.time_rounds(arms, warmup=2, repeats=3)
    one_round = [(a, p) for p in step_phases.PHASES for a in step_phases.ARMS]
    self.assertEqual(calls, one_round * 5)
    for arm in step_phases.ARMS:
      self.assertTrue(all(len(t) == 3 for t in seconds[arm].values()))
      # What the warm-up rollouts recorded is not counted.
      self.assertEqual(arms[arm].visible_lengths, [])

  def test_summary_medians_and_the_table_rows(self):
    seconds = {
        "diffusion": {p: [1.0, 3.0, 2.0] for p in step_phases.PHASES},
        "ar": {p: [1.0, 1.0, 1.0] for p in step_phases.PHASES},
    }
    arms = {
        "diffusion": step_phases.Arm({}, visible_lengths=[8, 4], forwards=[4]),
        "ar": step_phases.Arm({}, visible_lengths=[6, 6]),
    }
    summary = step_phases.summarize(seconds, arms)
    for row in summary["phases"].values():
      self.assertEqual((row["diffusion_s"], row["ar_s"]), (2.0, 1.0))
    self.assertEqual(summary["step"]["ratio"], 2.0)
    self.assertEqual(summary["tokens_per_forward"], 3.0)
    self.assertEqual(summary["mean_completion_length"]["ar"], 6.0)
    lines = step_phases.format_table(summary, "caption").splitlines()
    self.assertEqual(lines[0], "caption")
    names = [line.split()[0] for line in lines[2:-1]]
    self.assertEqual(names, [*step_phases.PHASES, "step"])
    self.assertIn("3.00 tokens per forward", lines[-1])


if __name__ == "__main__":
  absltest.main()
