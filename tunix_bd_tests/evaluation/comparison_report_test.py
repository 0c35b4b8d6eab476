# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/comparison_report.py: the pair of models it compares."""

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
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import teacher
from tunix_bd.evaluation import comparison_report
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import bd_export
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token
from tunix_bd.run import provenance
from tunix_bd.run import sections
from tunix_bd_tests.evaluation import comparison_test

_HF = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "hf")


def _model(**paths):
  section = config_files.get_config("compare", "tiny").model
  section.update(paths)
  return config_utils.from_section(
      sections.ModelSettings, section, "model", sections.COMPARE_MODEL_KEYS
  )


class CompareModelTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.ar = self.create_tempdir("ar").full_path
    self.bd = self.create_tempdir("bd").full_path

  def test_the_defaults_are_the_quickstarts_exports(self):
    model = _model()
    self.assertEqual(model.ar, "runs/quickstart/ar_pretrain/export")
    self.assertEqual(model.bd, "runs/quickstart/sft/export")

  def test_a_missing_model_says_where_the_quickstart_writes_it(self):
    for key in ("ar", "bd"):
      paths = dict(ar=self.ar, bd=self.bd)
      paths[key] = "no/such/dir"
      with self.assertRaisesRegex(
          ValueError,
          rf"^model\.{key}='no/such/dir' is not a directory; the quickstart"
          r" writes runs/quickstart/ar_pretrain/export \(AR\) and"
          r" runs/quickstart/sft/export \(its conversion\)\.$",
      ):
        provenance.check_directories(_model(**paths))

  def test_an_unconverted_model_is_refused(self):
    ar = os.path.join(_HF, "qwen2_tied")
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.bd=.* has no block_diffusion\.json: it is not a"
        r" block-diffusion checkpoint",
    ):
      comparison_report.open_models(ar, ar)

  def test_the_warning_heads_the_report(self):
    workdir = self.create_tempdir().full_path
    # pylint: disable-next=protected-access
    rows = comparison_test._rows([(0.9, 0.99)])
    settings = comparison_report.Settings((0.9,), 8, 4, 2, 1)
    text = comparison_report.write_report(
        workdir, rows, settings, prompts="p", title="t", seconds=1.0,
        warning="WARNING: w",
    )  # fmt: skip
    self.assertTrue(text.startswith("WARNING: w\n"))
    with open(os.path.join(workdir, "report.txt")) as f:
      self.assertEqual(f.read(), f"{text}\n")
    with open(os.path.join(workdir, "report.json")) as f:
      self.assertEqual(json.load(f)["warning"], "WARNING: w")

  def test_an_unknown_key_fails(self):
    with self.assertRaisesRegex(ValueError, "unknown model config keys"):
      _model(teacher=self.ar)


def _convert(source: str, export_dir: str, fmt: str) -> str:
  """`source` with the mask token added (one row more), exported in `fmt`
  untrained, as `sft.py` exports it."""
  tokenizer = tokenizer_lib.load_tokenizer(source)
  model, _ = hf_checkpoint.load(source)
  model, _, mask_id = mask_token.provision_mask_token(
      model, tokenizer, stop_ids=(tokenizer.eos_token_id,)
  )
  bd_export.export_block_diffusion(
      model,
      tokenizer,
      export_dir,
      bd=bd_config_lib.BlockDiffusionConfig(
          block_size=4,
          mask_token_id=mask_id,
          alignment=bd_config_lib.SAME_POSITION,
      ),
      chat_options=chat.ChatOptions(),
      source=hf_checkpoint.read_source(source),
      fmt=fmt,
  )
  return export_dir


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
        fmt: _convert(cls.ar, os.path.join(cls.root, fmt), fmt)
        for fmt in ("tunix_bd", "sdar")
    }

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _warning(self, ar: str, bd: str) -> str:
    model = _model(ar=ar, bd=bd)
    return comparison_report.conversion_warning(model, provenance.identify)

  def test_a_conversion_that_added_its_mask_token_opens_in_either_format(
      self,
  ):
    for fmt, export in self.exports.items():
      with self.subTest(fmt):
        models = comparison_report.open_models(self.ar, export)
        self.assertEqual(models.bd.bd.mask_token_id, 400)
        # compare.py's check: an SDAR export's tokenizer is read as
        # generation reads it (its EOS restored), so it is the AR's.
        teacher.check_compatible(
            self.ar, models.ar_tokenizer, models.bd.tokenizer, key="model.ar"
        )
        self.assertEqual(self._warning(self.ar, export), "")
    # The AR loop decodes with an id past the AR model's 400 rows as its
    # mask: on a copy with a 401st row, whose logit is masked.
    ar_model, _ = hf_checkpoint.load(self.ar)
    loop, bd = comparison_report.ar_loop(ar_model, 400)
    self.assertEqual((loop.config.vocab_size, bd.mask_token_id), (401, 400))
    self.assertEqual(ar_model.config.vocab_size, 400)
    config = generate_settings.denoise_config(
        models.ar_tokenizer, 8, max_new_tokens=4, threshold=1.0
    )
    denoise.Denoiser(loop, bd=bd, config=config)  # Checks the ids.

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

  def test_prompts_past_a_models_positions_are_refused_before_loading(self):
    ar = os.path.join(self.create_tempdir().full_path, "ar")
    shutil.copytree(self.ar, ar)
    with open(os.path.join(ar, "config.json")) as f:
      hf_config = json.load(f)
    with open(os.path.join(ar, "config.json"), "w") as f:
      json.dump(dict(hf_config, max_position_embeddings=16), f)
    records = [{
        "messages": [{"role": "user", "content": "sort 31"}],
        "answer": "13",
        "task": "jsonl",
    }]
    with self.assertRaisesRegex(
        ValueError,
        r"^prompt 0 \(0-based, \d+ tokens\) plus max_new_tokens=8 need \d+"
        r" positions, but model\.ar's config\.json declares"
        r" max_position_embeddings=16",
    ):
      comparison_report.evaluate(
          comparison_report.open_models(ar, self.exports["tunix_bd"]),
          records,
          comparison_report.Settings((0.9,), 8, 1, 1, 1),
          config_files.get_config("compare", "tiny").mesh,
      )


if __name__ == "__main__":
  absltest.main()
