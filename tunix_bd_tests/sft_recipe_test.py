# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `sft` recipe's errors name the config key at fault."""

import os

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.recipes import sft
from tunix_bd_tests import test_common


def _tiny(workdir: str, checkpoint: str):
  config = config_loading.load_config(
      plugin.PLUGIN.config_dir / "sft.py", "tiny"
  )
  config.update(workdir=workdir)
  config.model.checkpoint = checkpoint
  return config


class SftErrorsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    tokenizer = tokenizer_lib.build_char_tokenizer()
    cls.export = os.path.join(absltest.get_default_test_tmpdir(), "ar_export")
    export.save_qwen3(
        test_common.tiny_qwen3(vocab_size=len(tokenizer), seed=2),
        cls.export,
        tokenizer=tokenizer,
    )

  def setUp(self):
    super().setUp()
    self.workdir = os.path.join(self.create_tempdir().full_path, "sft")

  @parameterized.parameters(
      ("bd", "alignment", "left", r"bd\.alignment must be one of"),
      ("bd", "layout", "packed", r"bd\.layout must be one of"),
      ("corruption", "min_noise", 2.0, r"corruption\.min_noise must be in"),
  )
  def test_bad_setting_names_the_key(self, section, key, value, regex):
    config = _tiny(self.workdir, self.export)
    config[section][key] = value
    with self.assertRaisesRegex(ValueError, "^" + regex):
      sft.run(config)
    self.assertFalse(os.path.exists(self.workdir))

  def test_eval_batch_larger_than_the_held_out_set_names_eval_batch_size(
      self,
  ):
    config = _tiny(self.workdir, self.export)
    num_eval = config.data.num_eval
    config.eval.batch_size = num_eval + 1
    with self.assertRaisesRegex(
        ValueError,
        rf"^eval\.batch_size={num_eval + 1} exceeds the {num_eval} examples",
    ):
      sft.run(config)

  def test_empty_checkpoint_directory_says_it_has_no_tokenizer(self):
    config = _tiny(self.workdir, self.create_tempdir().full_path)
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint=.* has no tokenizer"
    ) as raised:
      sft.run(config)
    self.assertNotIn("sentencepiece", str(raised.exception))
    self.assertFalse(os.path.exists(self.workdir))


if __name__ == "__main__":
  absltest.main()
