# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.rewards, called the way Tunix's reward manager does."""

import os
import sys
import tempfile
import textwrap

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix.rl import reward_manager
from tunix.rl.grpo import grpo_learner
from tunix_bd.rl import rewards
from tunix_bd.rl import settings as settings_lib

_USER_MODULE = textwrap.dedent("""
    def length_reward(prompts, completions, **kwargs):
      return [float(len(c)) for c in completions]

    def nan_reward(prompts, completions, **kwargs):
      return [float("nan")] * len(completions)

    def short_reward(prompts, completions, **kwargs):
      return [0.0]

    def no_kwargs(prompts, completions):
      return [0.0] * len(completions)

    class Holder:
      @staticmethod
      def reward(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    NOT_CALLABLE = 3
""")


class RewardsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._dir = tempfile.mkdtemp()
    with open(os.path.join(cls._dir, "rl_user_rewards.py"), "w") as f:
      f.write(_USER_MODULE)
    sys.path.insert(0, cls._dir)

  @classmethod
  def tearDownClass(cls):
    sys.path.remove(cls._dir)
    super().tearDownClass()

  def test_answer_rewards_read_the_answer_column(self):
    completions = ["123", "12", "", "0123 "]
    answers = np.asarray(["123", "123", "9", "0123"])  # As Tunix passes them.
    kwargs = dict(answer=answers, mode="train")
    self.assertEqual(
        rewards.exact_match(["p"] * 4, completions, **kwargs), [1, 0, 0, 1]
    )
    np.testing.assert_allclose(
        rewards.partial_credit(["p"] * 4, completions, **kwargs),
        [1, 2 / 3, 0, 1],
    )

  @parameterized.parameters(rewards.exact_match, rewards.partial_credit)
  def test_missing_answer_fails_naming_it(self, fn):
    with self.assertRaisesRegex(ValueError, "'answer'"):
      fn(["p"], ["1"], mode="train")
    with self.assertRaisesRegex(ValueError, "2 'answer' values for 1"):
      fn(["p"], ["1"], answer=["1", "2"])

  def test_speed_penalty_is_capped_for_empty_completions(self):
    settings = settings_lib.RewardSettings(
        exact=0.0, partial=0.0, speed_weight=0.5, speed_cap=2.0
    )
    (speed,) = rewards.reward_fns(settings)
    self.assertEqual(speed.__name__, "speed")
    got = speed(
        ["p"] * 3,
        ["12345678", "", "1234"],
        num_forwards=np.asarray([4, 5, 3]),
        num_completion_tokens=np.asarray([8, 0, 4]),
    )
    np.testing.assert_allclose(got, [-0.25, -1.0, -0.375])
    with self.assertRaisesRegex(ValueError, "'num_forwards'"):
      speed(["p"], ["1"], num_completion_tokens=[1])

  def test_gated_speed_rewards_only_correct_answers(self):
    settings = settings_lib.RewardSettings(
        exact=0.0,
        partial=0.0,
        speed_weight=0.5,
        speed_cap=2.0,
        speed_gate="exact",
    )
    (speed,) = rewards.reward_fns(settings)
    got = speed(
        ["p"] * 4,
        ["1234", "1234", "9", ""],
        answer=["1234", "1234", "1", "1"],
        num_forwards=np.asarray([1, 4, 1, 5]),
        num_completion_tokens=np.asarray([4, 4, 1, 0]),
    )
    # Correct rows: 0.5 * (1 - (forwards / tokens) / 2); wrong rows: 0.
    np.testing.assert_allclose(got, [0.5 * (1 - 0.125), 0.25, 0.0, 0.0])
    with self.assertRaisesRegex(ValueError, "reward.speed_gate"):
      settings_lib.RewardSettings(speed_weight=0.5, speed_gate="tpf")

  def test_tunix_reward_manager_sums_and_logs_each_function_by_name(self):
    settings = settings_lib.RewardSettings(
        exact=1.0,
        partial=0.5,
        functions=("rl_user_rewards:length_reward",),
    )
    manager = reward_manager.SequenceRewardManager(
        rewards.reward_fns(settings),
        algo_config=grpo_learner.GRPOConfig(num_generations=2),
    )
    completions = ["123", "12", "", "9"]
    answers = np.asarray(["123", "123", "9", "9"])
    info = manager(
        prompts=["p"] * 4, completions=completions, answer=answers, mode="x"
    )
    exact = np.asarray([1, 0, 0, 1])
    partial = np.asarray([1, 2 / 3, 0, 1])
    lengths = np.asarray([3, 2, 0, 1])
    np.testing.assert_allclose(info["rewards"], exact + 0.5 * partial + lengths)
    metrics = info["log_metrics"]
    np.testing.assert_allclose(metrics["rewards/exact_match"][0], exact)
    np.testing.assert_allclose(
        metrics["rewards/partial_credit"][0], 0.5 * partial
    )
    np.testing.assert_allclose(metrics["rewards/length_reward"][0], lengths)

  def test_zero_weights_are_left_out(self):
    settings = settings_lib.RewardSettings(exact=2.0, partial=0.0)
    names = [fn.__name__ for fn in rewards.reward_fns(settings)]
    self.assertEqual(names, ["exact_match"])

  @parameterized.parameters(
      "rl_user_rewards:length_reward",
      "rl_user_rewards.length_reward",
      "rl_user_rewards:Holder.reward",
  )
  def test_import_paths_resolve(self, path):
    fn = rewards.resolve_function(path, "reward.functions[0]")
    self.assertLen(fn(prompts=["p"], completions=["ab"], mode="x"), 1)

  @parameterized.named_parameters(
      ("no_module", "no_such_module_xyz:f", "cannot import module"),
      ("no_name", "rl_user_rewards:missing", "has no 'missing'"),
      ("not_callable", "rl_user_rewards:NOT_CALLABLE", "is not callable"),
      ("no_kwargs", "rl_user_rewards:no_kwargs", r"\*\*kwargs"),
      ("no_module_part", "length_reward", "package.module:function"),
  )
  def test_bad_import_paths_fail_at_config_time_naming_the_key(
      self, path, message
  ):
    with self.assertRaisesRegex(
        ValueError, rf"reward\.functions\[1\].*{message}"
    ):
      settings_lib.RewardSettings(
          functions=("rl_user_rewards:length_reward", path)
      )

  @parameterized.parameters("nan_reward", "short_reward")
  def test_user_functions_must_return_one_finite_number_per_row(self, name):
    settings = settings_lib.RewardSettings(
        exact=0.0, partial=0.0, functions=(f"rl_user_rewards:{name}",)
    )
    (fn,) = rewards.reward_fns(settings)
    self.assertEqual(fn.__name__, name)
    with self.assertRaisesRegex(
        ValueError, rf"reward\.functions\[0\] \({name}"
    ):
      fn(prompts=["p", "q"], completions=["1", "2"], mode="x")

  def test_empty_reward_and_repeated_names_fail(self):
    with self.assertRaisesRegex(ValueError, "the reward is empty"):
      settings_lib.RewardSettings(exact=0.0, partial=0.0)
    with self.assertRaisesRegex(ValueError, "share a name"):
      settings_lib.RewardSettings(
          functions=("rl_user_rewards:length_reward",) * 2
      )


if __name__ == "__main__":
  absltest.main()
