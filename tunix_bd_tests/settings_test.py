# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.generate.settings`: decode settings, checked first."""

from absl.testing import absltest
from absl.testing import parameterized

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.cli import config_loading
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import settings as opd_settings
from tunix_bd.generate import denoise
from tunix_bd.generate import settings
from tunix_bd.rl import decode_settings as grpo_settings

_TOKENIZER = tokenizer_lib.build_char_tokenizer()

# Each recipe's section it decodes with, and that section's dataclass.
_DECODING_SECTIONS = {
    "generate": ("decode", settings.DecodeSettings),
    "opd": ("rollout", opd_settings.RolloutSettings),
    "grpo": ("rollout", grpo_settings.RolloutSettings),
}


class DecodeSettingsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("threshold", 2.0),
      ("threshold", 0.0),
      ("rule", "best"),
      ("top_k", 0),
      ("factor", -1.0),
      ("temperature", -0.5),
      ("use_cache", 1),
      ("max_new_tokens", 0),
      ("max_prompt_length", -1),
      ("batch_size", 0),
      ("seed", -1),
  )
  def test_a_bad_value_names_its_config_key(self, key, value):
    with self.assertRaisesRegex(ValueError, rf"^decode\.{key}\b"):
      config_utils.from_section(settings.DecodeSettings, {key: value}, "decode")

  def test_unknown_key_fails(self):
    with self.assertRaisesRegex(ValueError, "unknown decode config keys"):
      config_utils.from_section(
          settings.DecodeSettings, {"top_p": 0.9}, "decode"
      )

  @parameterized.named_parameters(
      (f"{recipe}_{name}", recipe, name, typed, value)
      for recipe in _DECODING_SECTIONS
      for name, typed, value in (("top_k", "4", 4), ("factor", "0.5", 0.5))
  )
  def test_every_decoding_section_forwards_its_rules_parameter(
      self, recipe, name, typed, value
  ):
    # As `--config.rollout.rule=top_k --config.rollout.top_k=4` on the CLI.
    key, cls = _DECODING_SECTIONS[recipe]
    config = config_loading.load_config(
        config_files.config_dir() / f"{recipe}.py"
    )
    config_loading.apply_overrides(
        config,
        [
            config_loading.Override(f"{key}.rule", name),
            config_loading.Override(f"{key}.{name}", typed),
        ],
    )
    section = config_utils.from_section(cls, config[key], key)
    prompt_length = (8,) if cls is settings.DecodeSettings else ()
    decode = section.denoise_config(_TOKENIZER, *prompt_length)
    self.assertEqual((decode.rule, getattr(decode, name)), (name, value))

  def test_denoise_config_binds_the_tokenizer_and_prompt_length(self):
    decode = settings.DecodeSettings(threshold=0.7, max_new_tokens=12)
    self.assertEqual(
        decode.denoise_config(_TOKENIZER, 30),
        denoise.DenoiseConfig(
            max_new_tokens=12,
            max_prompt_length=30,
            threshold=0.7,
            stop_ids=(_TOKENIZER.eos_token_id,),
            pad_id=_TOKENIZER.pad_token_id,
        ),
    )
    # A set max_prompt_length wins over the prompts' longest.
    fixed = settings.DecodeSettings(max_prompt_length=64)
    self.assertEqual(fixed.denoise_config(_TOKENIZER, 30).max_prompt_length, 64)

  def test_prompt_length_error_lists_exactly_the_long_rows(self):
    prompts = [[1] * 4, [1] * 9, [1] * 5, [1] * 12]
    with self.assertRaisesRegex(
        ValueError,
        r"^decode\.max_prompt_length=5 is shorter than rows 1 \(9 tokens\), "
        r"3 \(12 tokens\) of p\.jsonl",
    ):
      settings.check_prompt_lengths(
          prompts, 5, key="decode.max_prompt_length", where="p.jsonl"
      )
    settings.check_prompt_lengths(prompts, 12, key="k", where="w")

  def test_checkpoint_settings_must_agree(self):
    bd = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=3)
    settings.check_checkpoint_settings(bd, {"block_size": 8, "alignment": None})
    with self.assertRaisesRegex(ValueError, "bd.block_size=4 disagrees"):
      settings.check_checkpoint_settings(bd, {"block_size": 4})

  def test_the_bd_section_asserts_the_checkpoints_settings(self):
    bd = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=3)
    section = config_utils.to_section(settings.CheckpointBdSettings)
    config_utils.from_section(
        settings.CheckpointBdSettings, section, "bd"
    ).check(bd)
    section.block_size = 4  # A placeholder takes a typed override.
    asserted = config_utils.from_section(
        settings.CheckpointBdSettings, section, "bd"
    )
    with self.assertRaisesRegex(ValueError, "bd.block_size=4 disagrees"):
      asserted.check(bd)

  @parameterized.parameters(("block_size", 0), ("mask_token_id", -1))
  def test_a_bad_bd_value_names_its_key(self, key, value):
    with self.assertRaisesRegex(ValueError, rf"^bd\.{key} must be >="):
      settings.CheckpointBdSettings(**{key: value})


if __name__ == "__main__":
  absltest.main()
