# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.report's reward curves: logged as Tunix's RL does.

The held-out rows and the text are checked through `write_report`
(`report_test`).
"""

import tempfile

from absl.testing import absltest
from tunix_bd.rl import report
from tunix_bd_tests.rl import rl_test_common


class RewardCurvesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = tempfile.mkdtemp()

  def test_reward_curves_read_tunix_names(self):
    rl_test_common.log_rewards_like_tunix(self.workdir, [1, 1, 2, 3])
    curves = report.reward_curves(self.workdir)
    self.assertEqual(list(curves), ["sum", "exact_match", "partial_credit"])
    self.assertEqual([s for s, _ in curves["sum"]], [1, 2, 3])
    for (_, total), (_, e), (_, p) in zip(
        curves["sum"], curves["exact_match"], curves["partial_credit"]
    ):
      self.assertAlmostEqual(total, e + p, places=5)


if __name__ == "__main__":
  absltest.main()
