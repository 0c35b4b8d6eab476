# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.generate.settings`: decode settings, checked first."""

import types

from absl.testing import absltest
from absl.testing import parameterized

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.cli import config_loading
from tunix_bd.core import bd_config
from tunix_bd.core import special_ids
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.generate import settings

_TOKENIZER = tokenizer_lib.build_char_tokenizer()

# Each recipe's section it decodes with, and that section's class.
_DECODING_SECTIONS = {
    "generate": ("decode", settings.DecodeSettings),
    "opd": ("rollout", settings.OpdRollout),
    "grpo": ("rollout", settings.GrpoRollout),
}


def _section(recipe, **changes):
  """The recipe's decoding section, with `changes`, as its run builds it."""
  key, cls = _DECODING_SECTIONS[recipe]
  section = config_files.get_config(recipe)[key]
  section.update(changes)
  return config_utils.from_section(cls, section, key)


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

  @parameterized.named_parameters(
      (
          "grpo_temperature_0",
          "grpo",
          dict(temperature=0.0),
          "temperature must be > 0",
      ),
      ("grpo_threshold", "grpo", dict(threshold=1.5), "threshold"),
      ("grpo_top_k", "grpo", dict(top_k=0), "top_k"),
      ("grpo_rule", "grpo", dict(rule="greedy"), "rule"),
      (
          "grpo_eval_temperature",
          "grpo",
          dict(eval_temperature=-1.0),
          "eval_temperature",
      ),
      (
          "grpo_stop_ids",
          "grpo",
          dict(extra_stop_ids=(5, 5)),
          "extra_stop_ids has duplicates",
      ),
      ("grpo_seed", "grpo", dict(seed=-1), "seed"),
      (
          "grpo_max_prompt_length",
          "grpo",
          dict(max_prompt_length=0),
          "max_prompt_length must be >= 1",
      ),
      (
          "opd_max_prompt_length",
          "opd",
          dict(max_prompt_length=0),
          "max_prompt_length must be >= 1",
      ),
      (
          "opd_stop_ids",
          "opd",
          dict(extra_stop_ids=(-1,)),
          "extra_stop_ids must be token ids",
      ),
      ("opd_threshold", "opd", dict(threshold=0.0), "threshold"),
  )
  def test_a_bad_rollout_value_names_its_key(self, recipe, change, message):
    with self.assertRaisesRegex(ValueError, rf"^rollout\.{message}"):
      _section(recipe, **change)

  def test_only_grpo_needs_a_sampled_rollout(self):
    self.assertEqual(_section("opd", temperature=0.0).temperature, 0.0)
    self.assertEqual(_section("generate", temperature=0.0).temperature, 0.0)

  @parameterized.parameters(
      ("generate", "default"),
      ("generate", "long"),
      ("opd", "smoke"),
      ("grpo", "default"),
      ("grpo", "long"),
      ("grpo", "smoke"),
  )
  def test_every_variant_s_decoding_section_is_valid(self, recipe, variant):
    key, cls = _DECODING_SECTIONS[recipe]
    self.assertEqual(cls.SECTION, key)
    section = config_files.get_config(recipe, variant)[key]
    config_utils.from_section(cls, section, key)

  @parameterized.parameters("generate", "opd", "grpo")
  def test_unknown_key_fails(self, recipe):
    key, _ = _DECODING_SECTIONS[recipe]
    with self.assertRaisesRegex(ValueError, f"unknown {key} config keys"):
      _section(recipe, top_p=0.9)
    if recipe != "generate":  # A key of another recipe's section.
      with self.assertRaisesRegex(ValueError, f"unknown {key} config keys"):
        _section(recipe, batch_size=8)

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
    decode = section.denoise_config(_TOKENIZER, 8)
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

  def test_every_builder_stops_by_one_rule(self):
    # EOS, the checkpoint's other stop ids, then a rollout's extra ones:
    # sections and keyword settings (`TextGenerator`'s) alike.
    stops = {special_ids.CHECKPOINT_STOP_IDS_ATTR: (5,)}
    builders = {
        "decode": lambda t: settings.DecodeSettings().denoise_config(t, 8),
        "opd": lambda t: _section("opd").denoise_config(t),
        "grpo": lambda t: _section("grpo").denoise_config(t),
        "keywords": lambda t: settings.denoise_config(t, 8, max_new_tokens=4),
    }
    for name, build in builders.items():
      with self.subTest(name):
        tokenizer = types.SimpleNamespace(eos_token_id=2, pad_token_id=0)
        self.assertEqual(build(tokenizer).stop_ids, (2,))
        vars(tokenizer).update(stops)
        self.assertEqual(build(tokenizer).stop_ids, (2, 5))
        tokenizer.eos_token_id = None
        # Each names what can be set: a rollout's extra stop ids, else the
        # tokenizer's own EOS (generate's `decode` has no such key).
        fix = (
            "rollout.extra_stop_ids" if name in ("opd", "grpo") else "eos_token"
        )
        with self.assertRaisesRegex(ValueError, f"has no EOS token.*{fix}"):
          build(tokenizer)

  def test_a_rollout_stops_at_its_extra_stop_ids(self):
    rollout = _section("grpo", threshold=0.7, extra_stop_ids=(7,))
    decode = rollout.denoise_config(_TOKENIZER)
    self.assertEqual(decode.stop_ids, (_TOKENIZER.eos_token_id, 7))
    self.assertEqual(
        (decode.threshold, decode.temperature, decode.max_prompt_length),
        (0.7, 1.0, 40),
    )
    repeated = _section("opd", extra_stop_ids=(_TOKENIZER.eos_token_id,))
    with self.assertRaisesRegex(ValueError, "repeats the tokenizer's EOS"):
      repeated.denoise_config(_TOKENIZER)

  def test_every_decoding_section_can_scan_its_layers(self):
    for recipe in _DECODING_SECTIONS:
      with self.subTest(recipe):
        key = _DECODING_SECTIONS[recipe][0]
        self.assertFalse(
            _section(recipe).denoise_config(_TOKENIZER, 8).scan_layers
        )
        scanned = _section(recipe, scan_layers=True)
        self.assertTrue(scanned.denoise_config(_TOKENIZER, 8).scan_layers)
        with self.assertRaisesRegex(
            ValueError, rf"^{key}\.scan_layers: scan_layers must be a bool"
        ):
          _DECODING_SECTIONS[recipe][1](max_prompt_length=8, scan_layers=1)

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
    settings.CheckpointBdSettings(block_size=8).check(bd)
    with self.assertRaisesRegex(ValueError, "bd.block_size=4 disagrees"):
      settings.CheckpointBdSettings(block_size=4).check(bd)

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
