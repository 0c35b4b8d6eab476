# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Run files under a URL workdir (`gs://`), through `etils.epath`.

No network: `etils.epath.testing.mock_epath` sends every `gs://bucket/...`
operation to a local directory standing in for the bucket, so each test
checks what a URL workdir really receives.
"""

import contextlib
import json
import os
from unittest import mock

from absl.testing import absltest
from etils.epath import testing as epath_testing
import jax
import ml_collections
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import fingerprint
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import checkpoint_digest
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import grpo
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.training import metrics
from tunix_bd.training import options
from tunix_bd_tests import test_common

_URL = "gs://bucket/run"
_EPATH_FUNCTIONS = (
    "open",
    "exists",
    "isdir",
    "listdir",
    "glob",
    "makedirs",
    "mkdir",
    "remove",
    "rename",
    "replace",
    "rmtree",
    "stat",
)


@contextlib.contextmanager
def _fake_bucket(root: str):
  """`gs://X` is `root/X` for every epath operation in the block."""

  def local(path) -> str:
    text = os.fspath(path)
    if not text.startswith("gs://"):
      raise AssertionError(f"unexpected non-gs path {text!r}")
    return os.path.join(root, text[len("gs://") :])

  def redirect(original, path, *args, **kwargs):
    return original(local(path), *args, **kwargs)

  with epath_testing.mock_epath(**dict.fromkeys(_EPATH_FUNCTIONS, redirect)):
    yield local


class FilesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.bucket = self.create_tempdir().full_path
    self.enter_context(mock.patch.object(os, "getcwd", return_value="/cwd"))

  def test_urls_stay_urls(self):
    self.assertTrue(files.is_url("gs://b/x"))
    self.assertFalse(files.is_url("runs/x"))
    self.assertEqual(files.absolute("gs://b/x"), "gs://b/x")
    self.assertEqual(files.absolute("runs/x"), "/cwd/runs/x")

  def test_write_read_list_and_append_under_a_url(self):
    with _fake_bucket(self.bucket) as local:
      files.write_text(f"{_URL}/a/report.json", '{"x": 1}')
      files.append_lines(f"{_URL}/m.jsonl", ["1", "2"])
      files.append_lines(f"{_URL}/m.jsonl", ["3"])
      self.assertEqual(files.read_text(f"{_URL}/a/report.json"), '{"x": 1}')
      self.assertEqual(files.list_dir(_URL), ["a", "m.jsonl"])
      self.assertEqual(files.list_dir(f"{_URL}/missing"), [])
      with open(local(f"{_URL}/m.jsonl")) as f:
        self.assertEqual(f.read(), "1\n2\n3\n")
      files.remove_tree(f"{_URL}/a")
      self.assertFalse(files.exists(f"{_URL}/a/report.json"))
    # Nothing leaked into the working directory as a path named "gs:".
    self.assertFalse(os.path.exists("gs:"))

  def test_local_writes_are_whole_and_leave_no_temporary(self):
    path = os.path.join(self.bucket, "sub", "out.txt")
    files.write_text(path, "one")
    files.write_text(path, "two")
    self.assertEqual(files.read_text(path), "two")
    self.assertEqual(os.listdir(os.path.dirname(path)), ["out.txt"])

  def test_only_process_0_writes(self):
    path = os.path.join(self.bucket, "out.txt")
    with mock.patch.object(jax, "process_index", return_value=1):
      files.write_text(path, "x")
      files.append_lines(path, ["x"])
      with files.local_staging(f"{_URL}/export") as staged:
        os.makedirs(staged)
    self.assertFalse(os.path.exists(path))

  def test_fingerprint_recorded_and_checked_under_a_url(self):
    current = fingerprint.fingerprint({"model": "m"})
    checkpoints = f"{_URL}/checkpoints"
    with _fake_bucket(self.bucket) as local:
      test_common.check_or_record(checkpoints, current)
      with open(local(f"{checkpoints}/{fingerprint.FILE_NAME}")) as f:
        self.assertEqual(json.load(f), current)
      test_common.check_or_record(checkpoints, current)  # A resume.
      with self.assertRaisesRegex(ValueError, "model: checkpoint has 'm'"):
        test_common.check_or_record(
            checkpoints, fingerprint.fingerprint({"model": "n"})
        )

  def test_metrics_batched_under_a_url_and_read_back(self):
    with _fake_bucket(self.bucket):
      backend = metrics.JsonlMetricsBackend(f"{_URL}/{metrics.METRICS_FILE}")
      for step in range(3):
        backend.log_scalar("/train/loss", 1.0 / (step + 1), step=step)
      self.assertEqual(metrics.read_metrics(_URL, "/train/loss"), [])
      backend.close()
      self.assertEqual(
          metrics.read_metrics(_URL, "/train/loss"),
          [(0, 1.0), (1, 0.5), (2, 1.0 / 3)],
      )

  def test_a_url_workdir_reaches_the_trainer_config_unchanged(self):
    # The SFT config's own train section, with the workdir a user would pass.
    sft_config = config_files.get_config("sft")
    sft_config.workdir = _URL
    settings = config_utils.from_section(
        options.TimedTrain, sft_config.train, "train"
    )
    config = options.training_config(settings, sft_config.workdir, "test")
    self.assertEqual(config.checkpoint_root_directory, f"{_URL}/checkpoints")
    self.assertEqual(
        config.metrics_logging_options.log_dir, f"{_URL}/tensorboard"
    )
    local = options.training_config(settings, "runs/x", "test")
    self.assertEqual(local.checkpoint_root_directory, "/cwd/runs/x/checkpoints")

  def test_export_and_settings_under_a_url_match_a_local_export(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    model = test_common.tiny_qwen3(vocab_size=len(tokenizer))
    settings = bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3)
    local_dir = os.path.join(self.create_tempdir().full_path, "export")
    export.export_checkpoint(model, tokenizer, local_dir)
    with _fake_bucket(self.bucket) as local:
      for _ in range(2):  # The second export replaces the first.
        export.export_checkpoint(model, tokenizer, f"{_URL}/export")
      bd_config.save_settings(settings, f"{_URL}/export")
      self.assertEqual(bd_config.load_settings(f"{_URL}/export"), settings)
      url_dir = local(f"{_URL}/export")
    self.assertEqual(
        sorted(os.listdir(url_dir)),
        sorted(os.listdir(local_dir) + [bd_config.SETTINGS_FILE]),
    )
    for name in (checkpoint_digest.CONFIG_FILE, hf_checkpoint.WEIGHTS_FILE):
      with open(os.path.join(url_dir, name), "rb") as got:
        with open(os.path.join(local_dir, name), "rb") as want:
          self.assertEqual(got.read(), want.read(), name)

  def test_the_workdir_rule_keeps_a_url_off_the_local_disk(self):
    current = fingerprint.fingerprint({"model": "m"})
    no_local = mock.patch.object(
        os, "access", side_effect=AssertionError("local disk touched")
    )
    with _fake_bucket(self.bucket) as local, no_local:
      self.assertEqual(workdir_lib.check(_URL), _URL)
      self.assertEqual(workdir_lib.checkpoints(_URL), f"{_URL}/checkpoints")
      files.write_text("gs://bucket/taken", "x")
      with self.assertRaisesRegex(ValueError, "^workdir=.*existing object"):
        workdir_lib.check("gs://bucket/taken")
      fingerprint.check(workdir_lib.checkpoints(_URL), current)
      self.assertFalse(os.path.exists(local(f"{_URL}/checkpoints")))
      fingerprint.record(workdir_lib.checkpoints(_URL), current)
      path = local(f"{_URL}/checkpoints/{fingerprint.FILE_NAME}")
      with open(path) as f:
        self.assertEqual(json.load(f), current)
      with self.assertRaisesRegex(ValueError, "model: checkpoint has 'm'"):
        fingerprint.check(
            workdir_lib.checkpoints(_URL),
            fingerprint.fingerprint({"model": "n"}),
        )


class UrlRecipeTest(absltest.TestCase):
  """A recipe launched on a URL workdir writes nothing locally."""

  def setUp(self):
    super().setUp()
    self.bucket = self.create_tempdir().full_path
    self.cwd = self.create_tempdir().full_path
    old = os.getcwd()
    os.chdir(self.cwd)
    self.addCleanup(os.chdir, old)

  def _grpo(self):
    config = config_files.get_config("grpo", "smoke")
    config.workdir = _URL
    return config

  def test_grpo_failing_on_a_url_workdir_leaves_nothing(self):
    config = self._grpo()
    # An eval set smaller than eval.num_prompts (which data.num_eval
    # follows by default).
    config.data = ml_collections.ConfigDict(config.data.to_dict())
    config.data.num_eval = 4
    with _fake_bucket(self.bucket):
      with self.assertRaisesRegex(ValueError, r"eval\.num_prompts"):
        grpo.run(config)
    self.assertEqual(os.listdir(self.cwd), [])
    self.assertEqual(os.listdir(self.bucket), [])

  def test_grpo_checks_the_fingerprint_at_the_url(self):
    recorded = fingerprint.fingerprint({"model": "another"})
    with _fake_bucket(self.bucket):
      fingerprint.record(workdir_lib.checkpoints(_URL), recorded)
      with self.assertRaisesRegex(ValueError, "fingerprint differs"):
        grpo.run(self._grpo())
    self.assertEqual(os.listdir(self.cwd), [])


if __name__ == "__main__":
  absltest.main()
