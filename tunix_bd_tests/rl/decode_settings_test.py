# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.decode_settings: the `rollout` and `eval` sections."""

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.rl import decode_settings

_SECTIONS = {
    "rollout": decode_settings.RolloutSettings,
    "eval": decode_settings.EvalSettings,
}


class BadValuesTest(parameterized.TestCase):

  @parameterized.named_parameters(
      (
          "rollout_temperature_0",
          "rollout",
          dict(temperature=0.0),
          "rollout.temperature must be > 0",
      ),
      (
          "rollout_threshold",
          "rollout",
          dict(threshold=1.5),
          "rollout.threshold",
      ),
      ("rollout_commit_k", "rollout", dict(top_k=0), "rollout.top_k"),
      ("rollout_rule", "rollout", dict(rule="greedy"), "rollout.rule"),
      (
          "rollout_eval_temperature",
          "rollout",
          dict(eval_temperature=-1.0),
          "rollout.eval_temperature",
      ),
      (
          "rollout_stop_ids",
          "rollout",
          dict(extra_stop_ids=(5, 5)),
          "rollout.extra_stop_ids has duplicates",
      ),
      ("rollout_seed", "rollout", dict(seed=-1), "rollout.seed"),
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


class RolloutSettingsTest(absltest.TestCase):

  def test_train_and_eval_denoise_configs(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    rollout = decode_settings.RolloutSettings(
        threshold=0.7,
        temperature=0.8,
        eval_temperature=0.0,
        extra_stop_ids=(7,),
    )
    train = rollout.denoise_config(tokenizer)
    evaluation = rollout.denoise_config(tokenizer, evaluation=True)
    self.assertEqual(train.stop_ids, (tokenizer.eos_token_id, 7))
    self.assertEqual((train.temperature, evaluation.temperature), (0.8, 0.0))
    self.assertEqual((train.threshold, train.max_new_tokens), (0.7, 16))
    self.assertEqual(train.pad_id, tokenizer.pad_token_id)
    repeated = decode_settings.RolloutSettings(
        extra_stop_ids=(tokenizer.eos_token_id,)
    )
    with self.assertRaisesRegex(ValueError, "repeats the tokenizer's EOS"):
      repeated.denoise_config(tokenizer)


if __name__ == "__main__":
  absltest.main()
