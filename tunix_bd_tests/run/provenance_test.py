# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.run.provenance: runs name their sources by content."""

import copy
import hashlib
import json
import os
import re
import shutil
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from safetensors import numpy as safetensors_np
from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import sft
from tunix_bd.run import provenance
from tunix_bd_tests import test_common


class PortablePathTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("relative", "runs/ar/export", "runs/ar/export"),
      ("normalized", "./runs//ar/../ar/export/", "runs/ar/export"),
      ("absolute_inside", "{cwd}/runs/ar", "runs/ar"),
      ("start_itself", "{cwd}", "."),
      ("absolute_outside", "/data/models/Qwen3", None),
      ("relative_outside", "../models/Qwen3", None),
      ("parent", "..", None),
      ("sibling_with_common_prefix", "{cwd}x/export", None),
  )
  def test_inside_the_working_directory_or_none(self, path, expected):
    self.assertEqual(_portable_path(path.format(cwd=os.getcwd())), expected)

  def test_relative_to_another_working_directory(self):
    with mock.patch.object(os, "getcwd", return_value="/a"):
      self.assertEqual(_portable_path("/a/b/c"), "b/c")
    with mock.patch.object(os, "getcwd", return_value="/a/d"):
      self.assertIsNone(_portable_path("/a/b/c"))


def _portable_path(path):
  """The path `SourceCheckpoint.provenance` records for `path`, or None."""
  digest = mock.Mock(digest="d")
  record = provenance.SourceCheckpoint(path, digest).provenance()
  return record.get("path")


class DataFieldsTest(absltest.TestCase):
  """A `data` section's files enter the run fingerprint by content."""

  def fields(self, **data):
    settings = config_utils.from_section(data_settings.RlData, data, "data")
    return provenance.section_fields(settings, provenance.identify)

  def test_files_enter_by_content(self):
    root = self.create_tempdir().full_path
    lines = '{"prompt": "1+1=", "completion": "2"}\n'
    paths = []
    for name in ("a.jsonl", "b.jsonl"):
      paths.append(os.path.join(root, name))
      with open(paths[-1], "w") as f:
        f.write(lines)
    fields = self.fields(train=paths[0], max_length=8)
    digest = hashlib.sha256(lines.encode()).hexdigest()
    self.assertEqual(fields["train"], f"sha256:{digest}")
    self.assertEqual((fields["eval"], fields["max_length"]), ("", 8))
    # The same bytes elsewhere are the same data; other bytes are not.
    self.assertEqual(self.fields(train=paths[1], max_length=8), fields)
    with open(paths[1], "a") as f:
      f.write(lines)
    self.assertNotEqual(self.fields(train=paths[1])["train"], fields["train"])
    with self.assertRaisesRegex(ValueError, "nope.jsonl is not a file"):
      self.fields(eval=os.path.join(root, "nope.jsonl"))
    # GRPO's prompt file and a chat template override enter by content too.
    for key in ("prompts", "chat_template"):
      self.assertEqual(self.fields(**{key: paths[0]})[key], f"sha256:{digest}")
    self.assertEqual(self.fields()["chat_template"], "")
    # The other recipes' `data` has no `prompts`, nor does their fingerprint.
    plain = provenance.section_fields(data_settings.Data(), provenance.identify)
    self.assertNotIn("prompts", plain)


class SourceCheckpointTest(absltest.TestCase):
  """The SFT recipe's fingerprint and export record, on a tiny real export."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = tokenizer_lib.build_char_tokenizer()
    cls.export = os.path.join(absltest.get_default_test_tmpdir(), "ar_export")
    shutil.rmtree(cls.export, ignore_errors=True)
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=len(cls.tokenizer), seed=2),
        cls.export,
        tokenizer=cls.tokenizer,
    )
    cls.config = config_loading.load_config(
        plugin.PLUGIN.config_dir / "sft.py", "tiny"
    )

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.checkpoints = os.path.join(self.root, "run", "checkpoints")

  def place(self, name: str) -> str:
    """A copy of the export at `root/name`."""
    path = os.path.join(self.root, name)
    shutil.copytree(self.export, path)
    return path

  def run_fingerprint(self, path: str) -> dict:
    """The SFT recipe's fingerprint of a run converting checkpoint `path`."""
    config = copy.deepcopy(self.config)
    config.model.checkpoint = path
    config.workdir = os.path.join(self.root, "other_run")
    digest = fingerprint_lib.tokenizer_digest(self.tokenizer)
    return sft.validate(config).check_fingerprint(tokenizer=digest)

  def test_fingerprint_and_provenance_hold_no_path(self):
    source = provenance.identify(self.place("a"))
    fingerprint = self.run_fingerprint(source.path)
    self.assertEqual(
        fingerprint["fields"]["model"]["checkpoint"], source.digest.parts()
    )
    # Outside the working directory: the digest alone.
    self.assertEqual(source.provenance(), {"digest": source.digest.digest})
    for record in (fingerprint, source.provenance()):
      self.assertNotIn(self.root, json.dumps(record))
    # Inside it: also the path relative to it.
    with mock.patch.object(os, "getcwd", return_value=self.root):
      self.assertEqual(
          source.provenance(), {"digest": source.digest.digest, "path": "a"}
      )

  def test_moved_checkpoint_resumes(self):
    first = self.place("a")
    test_common.check_or_record(self.checkpoints, self.run_fingerprint(first))
    os.mkdir(os.path.join(self.checkpoints, "2"))
    moved = os.path.join(self.root, "elsewhere", "export")
    os.renames(first, moved)
    test_common.check_or_record(self.checkpoints, self.run_fingerprint(moved))

  def test_other_weights_under_the_same_path_are_refused(self):
    path = self.place("a")
    recorded = self.run_fingerprint(path)
    test_common.check_or_record(self.checkpoints, recorded)
    weights = os.path.join(path, hf_checkpoint.WEIGHTS_FILE)
    tensors = safetensors_np.load_file(weights)
    tensors["model.norm.weight"][0] += 1.0
    safetensors_np.save_file(tensors, weights, metadata={"format": "pt"})

    with self.assertRaises(ValueError) as raised:
      test_common.check_or_record(self.checkpoints, self.run_fingerprint(path))
    message = str(raised.exception)
    old = recorded["fields"]["model"]["checkpoint"]["weights"]
    self.assertIn(f"model.checkpoint.weights: checkpoint has '{old}'", message)
    # Only the weights changed, and the message says so.
    self.assertEqual(
        re.findall(r"([\w.]+): checkpoint has", message),
        ["model.checkpoint.weights"],
    )

  def test_a_record_that_names_the_checkpoint_by_path_fails_closed(self):
    path = self.place("a")
    fields = self.run_fingerprint(path)["fields"]
    # What tunix_bd wrote before checkpoints were identified by content.
    fields["model"]["checkpoint"] = os.path.abspath(path)
    fields["model.config"] = "0123456789abcdef"
    test_common.check_or_record(
        self.checkpoints, fingerprint_lib.fingerprint(fields)
    )
    os.mkdir(os.path.join(self.checkpoints, "2"))

    with self.assertRaises(ValueError) as raised:
      test_common.check_or_record(self.checkpoints, self.run_fingerprint(path))
    # A path is no digest: the field differs, named with both values.
    message = str(raised.exception)
    self.assertIn("its fingerprint differs", message)
    self.assertIn(
        f"model.checkpoint: checkpoint has {os.path.abspath(path)!r}", message
    )


if __name__ == "__main__":
  absltest.main()
