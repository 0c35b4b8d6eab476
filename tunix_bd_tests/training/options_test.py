# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.training.options`: the `train` section to Tunix, and
the `eval` sections."""

import os

from absl.testing import absltest
from absl.testing import parameterized
import jax
import numpy as np

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.training import options

# The `sft` recipe's `train` section but its time budget (it sets gradient
# accumulation).
_TRAIN = config_files.get_config("sft").train.to_dict()
del _TRAIN["time_budget_s"]


def _settings(**changes) -> options.Train:
  return config_utils.from_section(
      options.Train, dict(_TRAIN, **changes), "train"
  )


class TrainTest(parameterized.TestCase):

  @parameterized.parameters(
      ("batch_size", 0),
      ("max_steps", 2.5),
      ("eval_every_n_steps", True),
      ("warmup_steps", -1),
      ("learning_rate", 0.0),
      ("max_grad_norm", float("nan")),
      ("weight_decay", -0.1),
      ("gradient_accumulation_steps", 0),
      ("optimizer", "sgd"),
      ("mini_batch_size", 0),
      ("train_micro_batch_size", 1.5),
  )
  def test_a_bad_value_names_its_key(self, key, value):
    cls, values = options.Train, dict(_TRAIN, **{key: value})
    if key in ("mini_batch_size", "train_micro_batch_size"):  # GRPO's keys.
      cls = options.RlTrain
      values["gradient_accumulation_steps"] = None
    with self.assertRaisesRegex(ValueError, rf"^train\.{key}\b"):
      config_utils.from_section(cls, values, "train")

  def test_cross_field_rules(self):
    with self.assertRaisesRegex(ValueError, "train.warmup_steps=1000 must"):
      _settings(warmup_steps=1000, max_steps=1000)
    with self.assertRaisesRegex(ValueError, "must divide train.batch_size"):
      _settings(gradient_accumulation_steps=3)
    with self.assertRaisesRegex(ValueError, "unknown train config keys"):
      _settings(lr=1.0)
    # GRPO's RL batch sizes are no key of the other recipes' `train`.
    with self.assertRaisesRegex(ValueError, "unknown train config keys"):
      _settings(mini_batch_size=4)

  def test_optimizer_exposes_the_scheduled_learning_rate(self):
    state = options.optimizer(_settings()).init({"w": np.zeros(2, np.float32)})
    # Top-level hyperparameters (where Tunix reads the rate it logs); the
    # warmup starts from 0.
    self.assertEqual(float(state.hyperparams["learning_rate"]), 0.0)
    self.assertAlmostEqual(
        float(state.hyperparams["weight_decay"]), _TRAIN["weight_decay"]
    )

  def test_adafactor_state_and_first_update(self):
    # A 128 x 256 weight keeps a row and a column (AdamW two full moments);
    # the first update, from zero moments, by brute force: the gradient over
    # the root of its factored second moment, clipped to RMS 1, plus the
    # decoupled decay, times minus the rate.
    rng = np.random.default_rng(0)
    w = rng.normal(size=(128, 256)).astype(np.float32)
    g = rng.normal(size=(128, 256)).astype(np.float32)
    g[:, :8] *= 30  # Heavy columns, so the factoring matters.
    train = dict(learning_rate=0.1, warmup_steps=0, max_steps=10)
    sizes, updates = {}, {}
    for name in options.OPTIMIZERS:
      rule = options.optimizer(_settings(optimizer=name, **train))
      updates[name], state = rule.update(
          {"w": g}, rule.init({"w": w}), {"w": w}
      )
      sizes[name] = sum(x.size for x in jax.tree.leaves(state) if x.size > 1)
    self.assertEqual(sizes, {"adamw": 2 * 128 * 256, "adafactor": 128 + 256})
    squares = g.astype(np.float64) ** 2 + 1e-30
    rows, cols = squares.mean(axis=1), squares.mean(axis=0)
    direction = g / np.sqrt(np.outer(rows, cols) / rows.mean())
    direction /= max(1.0, np.sqrt(np.mean(direction**2)))
    expected = -0.1 * (direction + _TRAIN["weight_decay"] * w)
    np.testing.assert_allclose(
        updates["adafactor"]["w"], expected, rtol=1e-4, atol=1e-7
    )

  def test_training_config(self):
    # A section without the key (ar_pretrain's) gives Tunix no accumulation.
    no_key = dict(_TRAIN)
    del no_key["gradient_accumulation_steps"]
    settings = config_utils.from_section(options.Train, no_key, "t")
    self.assertIsNone(settings.gradient_accumulation_steps)
    config = options.training_config(settings, "rel/dir", "SFT")
    self.assertTrue(os.path.isabs(config.checkpoint_root_directory))
    self.assertEqual(config.max_steps, _TRAIN["max_steps"])
    self.assertIsNone(config.gradient_accumulation_steps)
    k2 = options.training_config(
        _settings(gradient_accumulation_steps=2), "rel/dir", "SFT"
    )
    self.assertEqual(k2.gradient_accumulation_steps, 2)

  def test_one_micro_batch_is_no_accumulation(self):
    # Tunix wraps the optimizer in optax.MultiSteps for any value but None;
    # at k=1 that only adds a parameter-sized accumulator.
    k1 = _settings(gradient_accumulation_steps=1)
    config = options.training_config(k1, "rel/dir", "SFT")
    self.assertIsNone(config.gradient_accumulation_steps)

  def test_checkpoints_are_written_in_the_foreground_on_cpu(self):
    # A background write keeps zero-copy views of the weights and optimizer
    # state alive, so the next steps could not donate them.
    config = options.training_config(_settings(), "rel/dir", "SFT")
    self.assertEqual(jax.default_backend(), "cpu")
    self.assertFalse(config.checkpointing_options.enable_async_checkpointing)


# Each recipe's `eval`.
_EVALS = {
    "sft": options.Eval,
    "ar_pretrain": options.ArEval,
    "opd": options.DecodeEval,
    "grpo": options.HeldOutEval,
}


def _eval(recipe, variant=None, **changes) -> options.Eval:
  section = config_files.get_config(recipe, variant).eval
  section.update(changes)
  return config_utils.from_section(_EVALS[recipe], section, "eval")


class EvalTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("thresholds", "grpo", dict(thresholds=(0.5, 0.0)), "thresholds"),
      ("no_thresholds", "grpo", dict(thresholds=()), "thresholds"),
      ("opd_thresholds", "opd", dict(thresholds=(1.5,)), "thresholds"),
      ("sampled_t", "grpo", dict(sampled_temperature=0.0), "sampled_temp"),
      ("sampled_threshold", "grpo", dict(sampled_threshold=0), "sampled_thr"),
      ("num_prompts", "grpo", dict(num_prompts=0), "num_prompts"),
      ("sampled_samples", "grpo", dict(sampled_samples=-1), "sampled_samp"),
      ("seed", "grpo", dict(seed=-1), "seed"),
      ("batch_size", "sft", dict(batch_size=0), "batch_size"),
      ("max_new_tokens", "ar_pretrain", dict(max_new_tokens=0), "max_new"),
  )
  def test_a_bad_value_names_its_key(self, recipe, change, key):
    with self.assertRaisesRegex(ValueError, rf"^eval\.{key}"):
      _eval(recipe, **change)

  @parameterized.parameters(
      ("grpo", "default"),
      ("grpo", "long"),
      ("grpo", "smoke"),
      ("opd", "smoke"),
      ("sft", None),
      ("ar_pretrain", None),
  )
  def test_every_variant_s_eval_section_is_valid(self, recipe, variant):
    self.assertIsInstance(_eval(recipe, variant), _EVALS[recipe])

  def test_another_recipe_s_key_fails(self):
    with self.assertRaisesRegex(ValueError, "unknown eval config keys"):
      _eval("opd", num_prompts=8)


if __name__ == "__main__":
  absltest.main()
