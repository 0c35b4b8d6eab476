# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/comparison_report.py's `model` section."""

import json
import os

from absl.testing import absltest
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd.evaluation import comparison_report
from tunix_bd.core import bd_config as bd_config_lib
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
    with self.assertRaisesRegex(
        ValueError, r"^model\.bd=.* it is not a block-diffusion model"
    ):
      comparison_report.check_converted(_model(ar=self.ar, bd=self.bd))
    with open(os.path.join(self.bd, bd_config_lib.SETTINGS_FILE), "w") as f:
      f.write("{}")
    comparison_report.check_converted(_model(ar=self.ar, bd=self.bd))

  def test_a_conversion_of_another_model_is_warned(self):
    ar, other = (os.path.join(_HF, n) for n in ("qwen2_tied", "qwen2_untied"))
    settings_file = os.path.join(self.bd, bd_config_lib.SETTINGS_FILE)

    def warning(ar_path, record):
      with open(settings_file, "w") as f:
        json.dump(record, f)
      model = _model(ar=ar_path, bd=self.bd)
      return comparison_report.conversion_warning(model, provenance.identify)

    source = provenance.identify(ar).provenance()
    self.assertEqual(warning(ar, {"converted_from": source}), "")
    self.assertRegex(
        warning(other, {"converted_from": source}),
        r"^WARNING: model\.bd=.* was converted from another checkpoint"
        r" \(.+\) than model\.ar=.*qwen2_untied",
    )
    # A model trained further (OPD, GRPO) records no AR source.
    self.assertEqual(warning(other, {}), "")

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


if __name__ == "__main__":
  absltest.main()
