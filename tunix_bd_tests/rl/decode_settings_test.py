# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.decode_settings: GRPO's `eval` section."""

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.rl import decode_settings

_SECTIONS = {"eval": decode_settings.EvalSettings}


class BadValuesTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("thresholds", "eval", dict(thresholds=(0.5, 0.0)), "eval.thresholds"),
      (
          "sampled_t",
          "eval",
          dict(sampled_temperature=0.0),
          "eval.sampled_temperature",
      ),
      ("num_prompts", "eval", dict(num_prompts=0), "eval.num_prompts"),
  )
  def test_bad_values_fail_naming_the_key(self, section, change, message):
    config = config_files.get_config("grpo")
    config[section].update(change)
    with self.assertRaisesRegex(ValueError, message):
      config_utils.from_section(_SECTIONS[section], config[section], section)

  @parameterized.parameters("default", "long", "smoke")
  def test_every_grpo_variant_s_sections_are_valid(self, variant):
    config = config_files.get_config("grpo", variant)
    for section, cls in _SECTIONS.items():
      config_utils.from_section(cls, config[section], section)


if __name__ == "__main__":
  absltest.main()
