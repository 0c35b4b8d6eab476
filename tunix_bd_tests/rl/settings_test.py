# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.settings and configs/grpo.py."""

import re

from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
from tunix.rl import common
from tunix.rl.grpo import grpo_learner
from tunix_bd import compat
from tunix_bd import config_files
from tunix_bd.recipes import grpo
from tunix_bd.rl import settings as settings_lib
from tunix_bd.run import provenance
from tunix_bd.run import stage as stage_lib

_VARIANTS = ("default", "weak", "extrapolate", "long", "smoke", "tiny")


def _settings(config) -> settings_lib.GrpoConfig:
  """The recipe's typed config, checked alone and together (no paths)."""
  with stage_lib.values_only():
    settings = stage_lib.Stage(config, settings_lib.GrpoConfig).settings
  settings_lib.check_together(settings)
  return settings


def _config(variant=None, **overrides):
  """The grpo config with `section.key=value` overrides."""
  config = config_files.get_config("grpo", variant)
  for dotted, value in overrides.items():
    section, key = dotted.split("__")
    config[section][key] = value
  return config


class TunixNamesTest(parameterized.TestCase):
  """The allowed values are exactly Tunix 0.1.7's."""

  @parameterized.parameters(*settings_lib.LOSS_AGG_MODES)
  def test_every_loss_agg_mode_is_tunix_s(self, mode):
    loss = compat.aggregate_loss(jnp.ones((2, 3)), jnp.ones((2, 3)), mode)
    self.assertTrue(bool(jnp.isfinite(loss)))

  @parameterized.parameters(*settings_lib.KL_LOSS_MODES)
  def test_every_kl_loss_mode_is_tunix_s(self, mode):
    kl = common.compute_kl_divergence(jnp.zeros(3), jnp.zeros(3), method=mode)
    self.assertEqual(float(jnp.abs(kl).max()), 0.0)

  @parameterized.parameters(*settings_lib.LOSS_ALGOS)
  def test_every_loss_algo_is_tunix_s(self, algo):
    grpo_learner.GRPOConfig(num_generations=2, loss_algo=algo)

  def test_tunix_rejects_what_the_settings_reject(self):
    with self.assertRaises(ValueError):
      common.aggregate_loss(jnp.ones((2, 3)), jnp.ones((2, 3)), "token-sum")
    with self.assertRaises(ValueError):
      common.compute_kl_divergence(jnp.zeros(3), jnp.zeros(3), method="k2")
    with self.assertRaises(ValueError):
      grpo_learner.GRPOConfig(num_generations=2, loss_algo="gspo")


class GrpoConfigTest(parameterized.TestCase):

  @parameterized.parameters(*_VARIANTS)
  def test_every_variant_gives_valid_settings(self, variant):
    run = _settings(_config(variant))
    self.assertGreater(run.rollout.temperature, 0)
    self.assertGreaterEqual(run.grpo.num_generations, 2)

  def test_the_recipe_checks_the_sections_together(self):
    with stage_lib.values_only():
      grpo.validate(_config("smoke"))
      with self.assertRaisesRegex(ValueError, "train.mini_batch_size=3"):
        grpo.validate(_config("smoke", train__mini_batch_size=3))

  def test_default_starts_from_the_quickstart_sft_export(self):
    config = _config()
    generate = config_files.get_config("generate")
    self.assertEqual(config.model.checkpoint, generate.model.checkpoint)
    run = _settings(config)
    self.assertEqual(
        (run.rollout.threshold, run.rollout.temperature), (0.5, 1.0)
    )
    self.assertEqual((run.train.batch_size, run.grpo.num_generations), (16, 8))

  def test_weak_starts_from_the_documented_sft_run(self):
    config = _config("weak")
    source = (config_files.config_dir() / "grpo.py").read_text()
    command = re.search(r"sft\.py(.*?)\n  tunix", source, re.S).group(1)
    flags = dict(re.findall(r"--config\.([\w.]+)=(\S+)", command))
    self.assertEqual(config.model.checkpoint, flags["workdir"] + "/export")
    self.assertEqual(int(flags["train.max_steps"]), 100)
    sft = config_files.get_config("sft")
    for key in flags:  # Every flag names a real sft key.
      section, _, name = key.rpartition(".")
      self.assertIn(name, sft[section] if section else sft)
    # The teacher the quickstart trains.
    quickstart = config_files.get_config("quickstart")
    self.assertEqual(
        flags["model.checkpoint"],
        f"{quickstart.workdir}/ar_pretrain/export",
    )

  def test_extrapolate_adds_operand_lengths_the_sft_data_lacks(self):
    config = _config("extrapolate")
    sft = config_files.get_config("sft")
    self.assertEqual(config.model.checkpoint, _config().model.checkpoint)
    self.assertEqual(tuple(config.data.tasks), tuple(sft.data.tasks))
    # Every length SFT saw, and longer ones it never did.
    self.assertEqual(config.data.min_len, sft.data.min_len)
    self.assertGreater(config.data.max_len, sft.data.max_len)
    # The longest answer (`double`, two characters a digit) and its stop.
    self.assertGreaterEqual(
        config.rollout.max_new_tokens, 2 * config.data.max_len
    )
    # The documented evaluation decodes the new lengths with real keys.
    source = (config_files.config_dir() / "grpo.py").read_text()
    command = re.search(r"generate\.py(.*?)\n\n", source, re.S).group(1)
    flags = dict(re.findall(r"--config\.([\w.]+)=(\S+)", command))
    self.assertEqual(flags["model.checkpoint"], f"{config.workdir}/export")
    self.assertEqual(int(flags["data.min_len"]), sft.data.max_len + 1)
    self.assertEqual(int(flags["data.max_len"]), config.data.max_len)
    generate = config_files.get_config("generate")
    for key in flags:
      section, _, name = key.rpartition(".")
      self.assertIn(name, generate[section])

  def test_long_uses_the_long_quickstart_model_and_count_task(self):
    config = _config("long")
    self.assertEqual(tuple(config.data.tasks), ("count",))
    self.assertGreaterEqual(config.rollout.max_new_tokens, 256)
    long_qs = config_files.get_config("quickstart", "long")
    self.assertEqual(config.model.checkpoint, f"{long_qs.workdir}/sft/export")

  def test_the_held_out_split_follows_eval_num_prompts(self):
    config = _config()
    config.eval.num_prompts = 512
    self.assertEqual(config.data.num_eval, 512)

  def test_smoke_needs_no_earlier_run(self):
    config = _config("smoke")
    self.assertTrue(config.model.random_init)
    self.assertLessEqual(config.train.max_steps, 3)
    self.assertLessEqual(config.train.batch_size, 2)

  def test_docstring_flags_name_real_keys(self):
    source = (config_files.config_dir() / "grpo.py").read_text()
    config = _config()
    grpo_commands = re.findall(r"grpo\.py(?:[^\n]*\\\n)*[^\n]*", source)
    flags = re.findall(r"--config\.([\w.]+)=", "\n".join(grpo_commands))
    self.assertContainsSubset({"grpo.loss_algo", "reward.functions"}, flags)
    for key in flags:
      section, name = key.split(".")
      self.assertIn(name, config[section])

  @parameterized.named_parameters(
      ("generations", dict(grpo__num_generations=1), "grpo.num_generations"),
      ("iterations", dict(grpo__num_iterations=0), "grpo.num_iterations"),
      ("beta", dict(grpo__beta=-0.1), "grpo.beta"),
      ("epsilon", dict(grpo__epsilon=1.0), "grpo.epsilon"),
      ("epsilon_high", dict(grpo__epsilon_high=0.1), "grpo.epsilon_high"),
      ("loss_algo", dict(grpo__loss_algo="gspo"), "grpo.loss_algo"),
      ("agg", dict(grpo__loss_agg_mode="mean"), "grpo.loss_agg_mode"),
      ("kl", dict(grpo__kl_loss_mode="k3"), "grpo.kl_loss_mode"),
      ("learner", dict(grpo__learner="trl"), "grpo.learner"),
      ("exact", dict(reward__exact=float("nan")), "reward.exact"),
      ("speed_cap", dict(reward__speed_cap=0.0), "reward.speed_cap"),
      (
          "functions",
          dict(reward__functions=("nope_xyz:f",)),
          r"reward.functions\[0\]",
      ),
      ("mini_batch", dict(train__mini_batch_size=3), "train.mini_batch_size"),
      (
          "micro_batch",
          dict(train__mini_batch_size=8, train__train_micro_batch_size=3),
          "train.train_micro_batch_size",
      ),
      ("lr", dict(train__learning_rate=0.0), "train.learning_rate"),
  )
  def test_bad_values_fail_naming_the_key(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      _settings(_config(**overrides))

  @parameterized.parameters("rollout", "grpo", "reward", "eval", "train")
  def test_unknown_keys_fail_naming_the_section(self, section):
    config = _config()
    config[section].unlock()
    config[section].top_p = 0.9
    with self.assertRaisesRegex(ValueError, f"unknown {section} config keys"):
      _settings(config)

  def test_gradient_accumulation_is_derived_by_tunix(self):
    config = _config()
    config.train.unlock()
    config.train.gradient_accumulation_steps = 2
    with self.assertRaisesRegex(ValueError, "train.gradient_accumulation"):
      _settings(config)


class LearnerSettingTest(absltest.TestCase):
  """`grpo.learner`: tunix_bd's learner, or Tunix's on prepared rollouts."""

  def test_the_default_is_tunix_bd_s_learner_and_it_is_fingerprinted(self):
    run = _settings(_config("smoke"))
    self.assertEqual(run.grpo.learner, settings_lib.TUNIX_BD_LEARNER)
    # Another learner is another loss: a resume may not change it.
    fields = provenance.section_fields(run.grpo, identify=None)
    self.assertEqual(fields["learner"], settings_lib.TUNIX_BD_LEARNER)

  def test_tunix_s_learner_needs_prepared_diffusion_rollouts(self):
    config = _config("smoke", grpo__learner=settings_lib.TUNIX_LEARNER)
    if compat.ROLLOUT_HAS_DIFFUSION_BATCH:
      run = _settings(config)
      self.assertEqual(run.grpo.learner, settings_lib.TUNIX_LEARNER)
    else:
      with self.assertRaisesRegex(
          ValueError, r"^grpo\.learner='tunix' needs a Tunix whose rollouts"
      ):
        _settings(config)

  @absltest.skipUnless(
      compat.ROLLOUT_HAS_DIFFUSION_BATCH, "needs RolloutOutput.diffusion_batch"
  )
  def test_a_speed_reward_is_refused_under_tunix_s_learner(self):
    config = _config(
        "smoke",
        grpo__learner=settings_lib.TUNIX_LEARNER,
        reward__speed_weight=0.1,
    )
    with self.assertRaisesRegex(
        ValueError, r"^reward\.speed_weight=0\.1 needs the forwards per row"
    ):
      _settings(config)
    config.reward.speed_weight = 0.0
    _settings(config)


if __name__ == "__main__":
  absltest.main()
