# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`grpo_step`: its sections fail closed, naming the key.

The arms themselves run in `bench_rl_test.py` (a real smoke run).
"""

import contextlib

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_utils
from benchmarks import grpo_step


class SettingsTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("prompts", dict(num_prompts=0), r"bench\.num_prompts"),
      ("warmup", dict(warmup_rounds=0), r"bench\.warmup_rounds"),
      ("repeats", dict(repeats=True), r"bench\.repeats must be an int"),
      ("rate", dict(learning_rate=-1.0), r"bench\.learning_rate"),
      ("nan", dict(learning_rate=float("nan")), r"bench\.learning_rate"),
  )
  def test_bad_bench_keys_are_named(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      grpo_step.GrpoStepSettings(**overrides)

  def test_both_checkpoints_are_required_unless_random(self):
    # The default paths are relative: read them where no quickstart ran.
    self.enter_context(contextlib.chdir(self.create_tempdir().full_path))
    model = grpo_step.GrpoStepModelSettings()
    with self.assertRaisesRegex(
        ValueError, r"model\.checkpoint=.* is not a model directory; .*quick"
    ):
      model.check_model_files()
    # A random model reads no checkpoint.
    grpo_step.GrpoStepModelSettings(random_init=True).check_model_files()

  def test_a_directory_needs_its_config_json(self):
    path = self.create_tempdir()
    model = grpo_step.GrpoStepModelSettings(
        checkpoint=path.full_path, ar_checkpoint=path.full_path
    )
    with self.assertRaisesRegex(ValueError, r"model\.checkpoint="):
      model.check_model_files()
    path.create_file("config.json", "{}")
    model.check_model_files()

  def test_the_nested_random_model_sections_are_checked(self):
    section = config_utils.to_section(grpo_step.GrpoStepModelSettings)
    section.scratch_bd.block_size = 0
    with self.assertRaisesRegex(ValueError, r"model\.scratch_bd\.block_size"):
      config_utils.from_section(
          grpo_step.GrpoStepModelSettings, section, "model"
      )


class ReplayLineTest(absltest.TestCase):

  def test_the_line_names_each_count(self):
    layout = dict(
        max_canvases_per_row=8,
        canvases_per_group=4,
        context_positions=36,
        tokens_per_row=68,
    )
    self.assertEqual(
        grpo_step.replay_line(layout),
        "  diffusion replay: rows need at most 8 canvases (a group of 4 per"
        " forward) and 36 clean positions: 68 tokens a row",
    )


if __name__ == "__main__":
  absltest.main()
