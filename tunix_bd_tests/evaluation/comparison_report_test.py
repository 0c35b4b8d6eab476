# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/comparison_report.py: settings, checks, the report."""

import dataclasses
import json
import os
import shutil

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import comparison_report
from tunix_bd.evaluation import pair
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import hf_checkpoint
from tunix_bd.run import provenance
from tunix_bd.models import sections
from tunix_bd_tests.evaluation import comparison_test

_TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
_HF = os.path.join(_TESTDATA, "hf")
_SDAR = os.path.join(_TESTDATA, "bd_formats", "sdar_tiny")
_SETTINGS = comparison_report.Settings(
    thresholds=(0.9,),
    max_new_tokens=8,
    batch_size=1,
    latency_prompts=1,
    repeats=1,
)


def _model(**paths):
  section = config_files.get_config("compare", "tiny").model
  section.update(paths)
  return config_utils.from_section(sections.CompareModel, section, "model")


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

  def test_the_warning_heads_the_report(self):
    workdir = self.create_tempdir().full_path
    # pylint: disable-next=protected-access
    rows = comparison_test._rows([(0.9, 0.99)])
    settings = dataclasses.replace(_SETTINGS, batch_size=4, latency_prompts=2)
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


class SettingsTest(parameterized.TestCase):
  """`compare`'s top-level keys, checked as the `Stage` builds them."""

  @parameterized.parameters(
      ("extra_batches", 0, r"^extra_batches must be >= 1, got 0\.$"),
      ("extra_batch_sizes", (8, 0), r"^extra_batch_sizes must be >= 1"),
      ("thresholds", 0.9, r"^thresholds must be values in \(0, 1\]"),
      ("thresholds", (), r"^thresholds must be values in \(0, 1\]"),
      ("repeats", True, r"^repeats must be an int, got bool"),
  )
  def test_a_value_that_cannot_work_is_refused_naming_its_key(
      self, key, value, message
  ):
    with self.assertRaisesRegex(ValueError, message):
      dataclasses.replace(_SETTINGS, **{key: value})

  def test_latency_prompts_must_fit_the_prompts(self):
    settings = dataclasses.replace(_SETTINGS, latency_prompts=3)
    settings.check_prompts(3)
    with self.assertRaisesRegex(
        ValueError, r"^latency_prompts=3 must be <= the 2 prompts\.$"
    ):
      settings.check_prompts(2)


class EvaluateChecksTest(absltest.TestCase):
  """What `evaluate` checks and builds before it decodes anything."""

  def test_the_ar_loop_gives_a_mask_id_past_the_ar_vocabulary_a_row(self):
    # A conversion that added its mask token (id 400 of an AR model of 400
    # rows): the AR loop decodes a copy with a 401st row, its logit masked.
    ar = os.path.join(_HF, "q3_tied_hd32")
    ar_model, _ = hf_checkpoint.load(ar)
    loop, bd = comparison_report.ar_loop(ar_model, 400)
    self.assertEqual((loop.config.vocab_size, bd.mask_token_id), (401, 400))
    self.assertEqual(ar_model.config.vocab_size, 400)
    config = generate_settings.denoise_config(
        tokenizer_lib.load_tokenizer(ar), 8, max_new_tokens=4, threshold=1.0
    )
    denoise.Denoiser(loop, bd=bd, config=config)  # Checks the ids.
    self.assertIs(comparison_report.ar_loop(ar_model, 3)[0], ar_model)

  def test_prompts_past_a_models_positions_are_refused_before_loading(self):
    ar = os.path.join(self.create_tempdir().full_path, "ar")
    shutil.copytree(os.path.join(_HF, "q3_tied_hd32"), ar)
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
          pair.open_models(ar, _SDAR),
          records,
          _SETTINGS,
          mesh.make_mesh(mesh.MeshSettings()),
      )


class ScannedLayersTest(absltest.TestCase):

  def test_rows_say_which_methods_decoded_with_the_layers_scanned(self):
    ar = os.path.join(_HF, "q3_tied_hd32")
    records = [{
        "messages": [{"role": "user", "content": "sort 31"}],
        "answer": "13",
        "task": "jsonl",
    }]
    rows = comparison_report.evaluate(
        pair.open_models(ar, _SDAR),
        records,
        _SETTINGS,
        mesh.make_mesh(mesh.MeshSettings()),
        scan_layers=True,
    )
    # Tunix's Sampler keeps its loop; both two-layer models scan.
    self.assertEqual([r["layers_scanned"] for r in rows], [False, True, True])


if __name__ == "__main__":
  absltest.main()
