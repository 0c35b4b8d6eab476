# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for data/settings.py's `data` sections."""

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.data import settings


def _data(**overrides):
  section = config_files.get_config("generate", "tiny").data
  section.update(overrides)
  return config_utils.from_section(settings.PromptData, section, "data")


class PromptDataTest(parameterized.TestCase):

  def test_a_config_states_only_what_it_changes(self):
    self.assertEqual(_data(), settings.PromptData(num_prompts=8))
    self.assertIsNone(_data().chat_options.enable_thinking)

  @parameterized.named_parameters(
      ("num_prompts", dict(num_prompts=0), r"^data\.num_prompts must be"),
      ("tasks", dict(tasks=("nope",)), r"^data\.tasks has unknown task"),
      ("lengths", dict(min_len=3, max_len=2), r"^data\.min_len and"),
  )
  def test_a_bad_embedded_task_value_names_its_key(self, overrides, error):
    with self.assertRaisesRegex(ValueError, error):
      _data(**overrides)

  def test_a_prompt_file_needs_no_embedded_task_keys(self):
    data = _data(prompts="prompts.jsonl", num_prompts=0, tasks=("nope",))
    self.assertEqual(data.prompts, "prompts.jsonl")

  def test_a_typo_fails(self):
    with self.assertRaisesRegex(ValueError, "unknown data config keys"):
      config_utils.from_section(
          settings.PromptData, {"prompt": "p.jsonl"}, "data"
      )

  def test_a_training_recipe_s_data_checks_no_prompt_keys(self):
    # It has no `num_prompts`, so the embedded tasks are not checked here
    # (a `train` file needs none).
    data = config_utils.from_section(
        settings.Data, {"tasks": ("nope",), "train": "t.jsonl"}, "data"
    )
    self.assertEqual(data.tasks, ("nope",))


if __name__ == "__main__":
  absltest.main()
