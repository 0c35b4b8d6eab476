# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for recipes/generate.py's checks: every section before the model.

The decoding itself is tested end to end in `quickstart_test`
(`generate.py` on the quickstart's export).
"""

import os
from unittest import mock

from absl.testing import absltest
from tunix_bd import config_files
from tunix_bd.core import bd_config
from tunix_bd.evaluation import completions
from tunix_bd.recipes import generate
from tunix_bd.run import workdir as workdir_lib
from tunix_bd_tests import test_common
from tunix_bd_tests.run import run_test_common


def _config(**overrides):
  config = config_files.get_config("generate", "tiny")
  config.update(overrides)
  return config


class ValidateTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = self.create_tempdir().full_path
    self.checkpoint = self.create_tempdir().full_path

  def test_the_output_defaults_to_the_workdirs_completions(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = self.checkpoint
    stage = generate.validate(config)
    self.assertEqual(
        stage.output_path(completions.COMPLETIONS_FILE),
        os.path.join(self.workdir, "completions.jsonl"),
    )
    self.assertEqual(stage.settings.decode.max_new_tokens, 8)
    self.assertIsNone(stage.settings.bd.block_size)
    output = os.path.join(self.workdir, "mine.jsonl")
    config = _config(output=output)
    config.model.checkpoint = self.checkpoint
    stage = generate.validate(config)
    self.assertEqual(stage.output_path(completions.COMPLETIONS_FILE), output)

  def test_an_existing_file_not_its_own_output_is_refused(self):
    victim = self.create_tempfile("model.safetensors", content="w").full_path
    config = _config(output=victim)
    config.model.checkpoint = self.checkpoint
    with self.assertRaisesRegex(ValueError, r"^output=.* is not a completions"):
      generate.validate(config)

  def test_a_decode_error_comes_before_the_checkpoints(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = "no/such/dir"
    config.decode.threshold = 2.0
    with self.assertRaisesRegex(ValueError, r"^decode\.threshold: "):
      generate.validate(config)
    config.decode.threshold = 0.9
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint='no/such/dir' is not a directory"
    ):
      generate.validate(config)

  def test_bad_sections_name_their_keys(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = self.checkpoint
    config.bd.block_size = 0
    with self.assertRaisesRegex(ValueError, r"^bd\.block_size must be >= 1"):
      generate.validate(config)
    config = _config(output=self.workdir)  # A directory.
    with self.assertRaisesRegex(ValueError, r"^output="):
      generate.validate(config)


class HoldTest(absltest.TestCase):

  def test_a_new_workdir_is_held_before_decoding(self):
    # Another launch takes the new workdir while this one reads its prompts.
    config = _config(
        workdir=os.path.join(self.create_tempdir().full_path, "run")
    )
    config.model.checkpoint = test_common.sdar_tiny_with_positions(
        self.create_tempdir().full_path, 512
    )
    config.bd.alignment = bd_config.SAME_POSITION
    real = generate.dataset_lib.prompt_records

    def records_then_another_launch(data):
      holder = run_test_common.hold_workdir(config.workdir)
      self.addCleanup(holder.wait)
      self.addCleanup(holder.kill)
      return real(data)

    with mock.patch.object(
        generate.dataset_lib, "prompt_records", records_then_another_launch
    ):
      with self.assertRaisesRegex(ValueError, r"^workdir=.* is in use by"):
        generate.run(config)
    self.assertEqual(os.listdir(config.workdir), [workdir_lib.LOCK_FILE])


class PositionsTest(absltest.TestCase):

  def test_a_prompt_past_max_position_embeddings_is_refused(self):
    # The embedded prompts and `tiny`'s 8-token budget need over 16.
    # A workdir not yet made: the refusal must not make it (an existing one
    # would hold only the run's `.lock`).
    config = _config(
        workdir=os.path.join(self.create_tempdir().full_path, "run")
    )
    config.model.checkpoint = test_common.sdar_tiny_with_positions(
        self.create_tempdir().full_path, 16
    )
    config.bd.alignment = bd_config.SAME_POSITION
    with self.assertRaisesRegex(
        ValueError,
        r"^row \d+ \(0-based\) of .* \(\d+ tokens\) plus"
        r" decode\.max_new_tokens=8 need \d+ positions, but"
        r" model\.checkpoint's config\.json declares"
        r" max_position_embeddings=16",
    ):
      generate.run(config)
    self.assertFalse(os.path.exists(config.workdir))


if __name__ == "__main__":
  absltest.main()
