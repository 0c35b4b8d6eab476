# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.bd_config."""

import dataclasses
import os

from absl.testing import absltest
from absl.testing import parameterized
import ml_collections
import numpy as np
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.core import bd_config


def _model_config(**overrides) -> qwen3_lib.ModelConfig:
  fields = dict(
      num_layers=2,
      vocab_size=64,
      embed_dim=32,
      hidden_dim=64,
      num_heads=2,
      head_dim=16,
      num_kv_heads=1,
      rope_theta=1_000_000,
      norm_eps=1e-6,
  )
  fields.update(overrides)
  return qwen3_lib.ModelConfig(**fields)


class BlockDiffusionConfigTest(parameterized.TestCase):

  def test_defaults_and_round_trip(self):
    config = bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3)
    self.assertEqual(config.alignment, bd_config.SHIFTED)
    self.assertEqual(config.layout, bd_config.CLEAN_CONTEXT)
    self.assertEqual(
        config.to_dict(),
        {
            "block_size": 4,
            "mask_token_id": 3,
            "alignment": "shifted",
            "layout": "clean_context",
        },
    )
    cfg = ml_collections.ConfigDict(config.to_dict())
    self.assertEqual(
        bd_config.BlockDiffusionConfig.from_config_dict(cfg), config
    )
    # Frozen and hashable: usable as a static jit argument.
    with self.assertRaises(dataclasses.FrozenInstanceError):
      config.block_size = 8  # pytype: disable=attribute-error
    self.assertEqual(hash(config), hash(dataclasses.replace(config)))

  def test_from_config_dict_with_overrides(self):
    cfg = ml_collections.ConfigDict({
        "block_size": 8,
        "mask_token_id": 5,
        "alignment": bd_config.SAME_POSITION,
        "layout": bd_config.SINGLE_CANVAS,
    })
    config = bd_config.BlockDiffusionConfig.from_config_dict(cfg)
    self.assertEqual(
        config,
        bd_config.BlockDiffusionConfig(
            8, 5, bd_config.SAME_POSITION, bd_config.SINGLE_CANVAS
        ),
    )

  def test_numpy_ints_are_normalised(self):
    config = bd_config.BlockDiffusionConfig(np.int64(4), np.int32(3))
    self.assertIs(type(config.block_size), int)
    self.assertIs(type(config.mask_token_id), int)

  @parameterized.named_parameters(
      ("zero_block", dict(block_size=0, mask_token_id=1), "block_size"),
      ("negative_block", dict(block_size=-2, mask_token_id=1), "block_size"),
      ("bool_block", dict(block_size=True, mask_token_id=1), "block_size"),
      ("float_block", dict(block_size=4.0, mask_token_id=1), "block_size"),
      ("negative_mask", dict(block_size=4, mask_token_id=-1), "mask_token_id"),
      ("bool_mask", dict(block_size=4, mask_token_id=False), "mask_token_id"),
      (
          "alignment",
          dict(block_size=4, mask_token_id=1, alignment="left"),
          r"alignment must be one of \['same_position', 'shifted'\]",
      ),
      (
          "layout",
          dict(block_size=4, mask_token_id=1, layout="packed"),
          r"layout must be one of \['single_canvas', 'clean_context'\]",
      ),
  )
  def test_rejects_bad_values(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      bd_config.BlockDiffusionConfig(**kwargs)

  @parameterized.named_parameters(
      ("missing_block", {"mask_token_id": 1}, "missing 'block_size'"),
      ("missing_mask", {"block_size": 4}, "missing 'mask_token_id'"),
      (
          "unknown_key",
          {"block_size": 4, "mask_token_id": 1, "blocksize": 8},
          r"unknown block-diffusion config keys \['blocksize'\]",
      ),
      ("bad_value", {"block_size": 0, "mask_token_id": 1}, "block_size"),
  )
  def test_from_config_dict_fails_closed(self, fields, message):
    with self.assertRaisesRegex(ValueError, message):
      bd_config.BlockDiffusionConfig.from_config_dict(
          ml_collections.ConfigDict(fields)
      )

  def test_validate_for_model_accepts_a_good_setup(self):
    config = bd_config.BlockDiffusionConfig(4, 63)
    config.validate_for_model(
        _model_config(), pad_id=0, eos_id=2, stop_ids=(1, 5)
    )
    config.validate_for_model(_model_config(), pad_id=None, eos_id=None)

  @parameterized.named_parameters(
      ("out_of_range", 64, {}, r"outside the model vocabulary \[0, 64\)"),
      ("pad", 0, {}, "equals pad_id"),
      ("eos", 2, {}, "equals eos_id"),
      ("stop", 5, {}, r"equals stop_ids\[1\]"),
      (
          "flash",
          10,
          {"use_flash_attention": True},
          "use_flash_attention=True is not supported",
      ),
  )
  def test_validate_for_model_fails_closed(self, mask_id, overrides, message):
    config = bd_config.BlockDiffusionConfig(4, mask_id)
    with self.assertRaisesRegex(ValueError, message):
      config.validate_for_model(
          _model_config(**overrides), pad_id=0, eos_id=2, stop_ids=(1, 5)
      )

  def test_validate_for_model_needs_a_vocab_size(self):
    config = bd_config.BlockDiffusionConfig(4, 3)
    with self.assertRaisesRegex(ValueError, "model_config.vocab_size"):
      config.validate_for_model(object(), pad_id=0, eos_id=2)

  def test_a_truncated_settings_file_names_itself_and_the_fix(self):
    directory = self.create_tempdir().full_path
    bd_config.save_settings(bd_config.BlockDiffusionConfig(4, 3), directory)
    path = os.path.join(directory, bd_config.SETTINGS_FILE)
    with open(path, "r+") as f:
      f.truncate(12)
    for load in (
        bd_config.load_settings,
        lambda d: bd_config.load_extra(d, "k"),
    ):
      with self.assertRaisesRegex(
          ValueError,
          f"^{path} is not valid JSON .*; relaunch the run that exported it",
      ):
        load(directory)


if __name__ == "__main__":
  absltest.main()
