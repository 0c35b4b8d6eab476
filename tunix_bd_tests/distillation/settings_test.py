# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of OPD's `opd` section and its `train` section with a time budget."""

from absl.testing import absltest
from absl.testing import parameterized
import ml_collections

from tunix_bd import config_utils
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.training import options

_TRAIN = dict(
    batch_size=4,
    gradient_accumulation_steps=2,
    max_steps=10,
    learning_rate=1e-4,
    warmup_steps=1,
    weight_decay=0.0,
    max_grad_norm=1.0,
    eval_every_n_steps=5,
    checkpoint_every_n_steps=5,
    checkpoints_to_keep=1,
)


def _split(section):
  return config_utils.from_section(options.TimedTrain, section, "train")


class TimedTrainTest(parameterized.TestCase):

  def test_holds_the_train_settings_and_the_time_budget(self):
    section = ml_collections.ConfigDict(dict(_TRAIN, time_budget_s=30))
    train = _split(section)
    self.assertEqual(train, options.TimedTrain(**_TRAIN, time_budget_s=30))
    self.assertEqual(train.seconds, 30.0)
    self.assertIsNone(_split(dict(_TRAIN, time_budget_s=0.0)).seconds)
    self.assertIsNone(_split(_TRAIN).seconds)

  @parameterized.named_parameters(
      ("negative", -1.0),
      ("infinite", float("inf")),
      ("bool", True),
      ("string", "60"),
  )
  def test_a_bad_budget_names_its_key(self, value):
    with self.assertRaisesRegex(ValueError, r"train\.time_budget_s"):
      _split(dict(_TRAIN, time_budget_s=value))

  def test_other_keys_are_checked_by_train_settings(self):
    with self.assertRaisesRegex(ValueError, r"unknown train config keys"):
      _split(dict(_TRAIN, max_step=3))
    with self.assertRaisesRegex(ValueError, r"train\.warmup_steps"):
      _split(dict(_TRAIN, warmup_steps=10))


class OpdSettingsTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("canvas", dict(canvas="clean"), r"^opd\.canvas must be one of"),
      ("temperature", dict(temperature=0.0), r"^opd\.temperature"),
      ("hard_loss_weight", dict(hard_loss_weight=-1), r"^opd\.hard_loss"),
  )
  def test_bad_values_name_their_key(self, values, message):
    with self.assertRaisesRegex(ValueError, message):
      settings_lib.OpdSettings(**values)


if __name__ == "__main__":
  absltest.main()
