# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/pair.py: the two checkpoints `compare.py` compares."""

import json
import os
import re
import shutil
import tempfile

from absl.testing import absltest
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.distillation import teacher
from tunix_bd.evaluation import pair
from tunix_bd.run import provenance
from tunix_bd.models import sections
from tunix_bd_tests.models import hf_fixtures

_HF = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "hf")


def _model(**paths):
  section = config_files.get_config("compare", "tiny").model
  section.update(paths)
  return config_utils.from_section(sections.CompareModel, section, "model")


class ComparedPairTest(absltest.TestCase):
  """An AR fixture whose vocabulary is its tokenizer's, and its conversion
  (a mask token added: one row more) exported as tunix_bd's and as SDAR's
  format; other models of other shapes with the same tokenizer."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir())
    cls.ar = os.path.join(_HF, "q3_tied_hd32")
    cls.exports = {
        fmt: hf_fixtures.export_untrained(
            cls.ar,
            os.path.join(cls.root, fmt),
            chat_options=chat.ChatOptions(),
            fmt=fmt,
            alignment=bd_config_lib.SAME_POSITION,
        )[0]
        for fmt in ("tunix_bd", "sdar")
    }

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _warning(self, ar: str, bd: str) -> str:
    model = _model(ar=ar, bd=bd)
    return pair.conversion_warning(model, provenance.identify)

  def test_a_conversion_that_added_its_mask_token_opens_in_either_format(
      self,
  ):
    for fmt, export in self.exports.items():
      with self.subTest(fmt):
        models = pair.open_models(self.ar, export)
        self.assertEqual(models.bd.bd.mask_token_id, 400)
        # compare.py's check: an SDAR export's tokenizer is read as
        # generation reads it (its EOS restored), so it is the AR's.
        teacher.check_compatible(
            self.ar, models.ar_tokenizer, models.bd.tokenizer, key="model.ar"
        )
        self.assertEqual(self._warning(self.ar, export), "")
    # Its AR loop: comparison_report_test.py's EvaluateChecksTest.

  def test_an_unconverted_model_is_refused(self):
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.bd=.* has no block_diffusion\.json: it is not a"
        r" block-diffusion checkpoint",
    ):
      pair.open_models(self.ar, self.ar)

  def test_a_model_of_another_shape_is_warned_naming_it(self):
    export = self.exports["tunix_bd"]
    for other, differs in (
        ("q3_bf16", r"num_layers=3 vs 2"),
        ("qwen2_tied", r"family qwen2 vs qwen3"),
    ):
      self.assertRegex(
          self._warning(os.path.join(_HF, other), export),
          rf"^WARNING: model\.bd={re.escape(repr(export))} is not a"
          rf" conversion of model\.ar=.*{other}': their models differ"
          rf" \(.*{differs}",
      )

  def test_a_conversion_of_another_checkpoint_is_warned(self):
    bd = os.path.join(self.create_tempdir().full_path, "bd")
    shutil.copytree(self.exports["tunix_bd"], bd)
    settings_file = os.path.join(bd, bd_config_lib.SETTINGS_FILE)
    with open(settings_file) as f:
      settings = json.load(f)
    source = provenance.identify(self.ar).provenance()
    for recorded, warned in (
        (source, "^$"),
        (
            {"digest": "sha256:" + "0" * 64, "path": "elsewhere"},
            r"^WARNING: model\.bd=.* was converted from another checkpoint"
            r" \(elsewhere\) than model\.ar=.*q3_tied_hd32",
        ),
    ):
      with open(settings_file, "w") as f:
        json.dump(dict(settings, converted_from=recorded), f)
      self.assertRegex(self._warning(self.ar, bd), warned)


if __name__ == "__main__":
  absltest.main()
