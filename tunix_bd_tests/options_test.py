# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.training.options`: the `train` section to Tunix."""

import os

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tunix_bd import config_utils
from tunix_bd.training import options

_TRAIN = dict(
    batch_size=16,
    max_steps=100,
    learning_rate=1e-3,
    warmup_steps=10,
    weight_decay=0.01,
    max_grad_norm=1.0,
    eval_every_n_steps=50,
    checkpoint_every_n_steps=50,
    checkpoints_to_keep=2,
)


def _settings(**changes) -> options.TrainSettings:
  return config_utils.from_section(
      options.TrainSettings, dict(_TRAIN, **changes), "train"
  )


class TrainSettingsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("batch_size", 0),
      ("max_steps", 2.5),
      ("eval_every_n_steps", True),
      ("warmup_steps", -1),
      ("learning_rate", 0.0),
      ("max_grad_norm", float("nan")),
      ("weight_decay", -0.1),
      ("gradient_accumulation_steps", 0),
  )
  def test_a_bad_value_names_its_key(self, key, value):
    with self.assertRaisesRegex(ValueError, rf"^train\.{key}\b"):
      _settings(**{key: value})

  def test_cross_field_rules(self):
    with self.assertRaisesRegex(ValueError, "train.warmup_steps=100"):
      _settings(warmup_steps=100)
    with self.assertRaisesRegex(ValueError, "must divide train.batch_size"):
      _settings(gradient_accumulation_steps=3)
    with self.assertRaisesRegex(ValueError, "unknown train config keys"):
      _settings(lr=1.0)

  def test_optimizer_exposes_the_scheduled_learning_rate(self):
    state = options.optimizer(_settings()).init({"w": np.zeros(2, np.float32)})
    # Top-level hyperparameters (where Tunix reads the rate it logs); the
    # warmup starts from 0.
    self.assertEqual(float(state.hyperparams["learning_rate"]), 0.0)
    self.assertAlmostEqual(float(state.hyperparams["weight_decay"]), 0.01)

  def test_training_config(self):
    settings = _settings()
    self.assertIsNone(settings.gradient_accumulation_steps)
    config = options.training_config(settings, "rel/dir", "SFT")
    self.assertTrue(os.path.isabs(config.checkpoint_root_directory))
    self.assertEqual(config.max_steps, 100)
    self.assertIsNone(config.gradient_accumulation_steps)
    k2 = options.training_config(
        _settings(gradient_accumulation_steps=2), "rel/dir", "SFT"
    )
    self.assertEqual(k2.gradient_accumulation_steps, 2)


if __name__ == "__main__":
  absltest.main()
