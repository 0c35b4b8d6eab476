# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `opd` recipe end to end: smoke run, resume, fingerprint, bad inputs."""

import collections
import contextlib
import io
import json
import os

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.recipes import opd
from tunix_bd_tests import test_common


def _smoke(workdir: str, **train):
  config = config_loading.load_config(
      plugin.PLUGIN.config_dir / "opd.py", "smoke"
  )
  config.workdir = workdir
  config.train.update({"max_steps": 2, "eval_every_n_steps": 2, **train})
  return config


def _names(workdir: str) -> set[str]:
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    return {json.loads(line)["name"] for line in f}


class OpdRecipeTest(absltest.TestCase):

  def test_smoke_run_resumes_and_refuses_other_settings(self):
    workdir = os.path.join(self.create_tempdir().full_path, "opd")
    metrics = opd.run(_smoke(workdir))
    self.assertIn("exact_match@0.9", metrics)
    with open(os.path.join(workdir, "report.json"), encoding="utf-8") as f:
      first = json.load(f)
    self.assertEqual(first["steps"], 2)
    self.assertTrue(
        os.path.isfile(os.path.join(workdir, "export", bd_config.SETTINGS_FILE))
    )
    names = _names(workdir)
    for name in (
        "/train/kl",
        "/train/loss",
        "/eval/decode/kl@0.5",
        "/eval/decode/tokens_per_forward@0.9",
    ):
      self.assertIn(name, names)

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      opd.run(_smoke(workdir, max_steps=3))  # Resumes at step 2.
    self.assertIn(
        f"opd: resumed from step 2 (workdir {workdir})", stdout.getvalue()
    )
    # The decode evaluation at step 2 ran again on resume: one row still.
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
      rows = collections.Counter(
          (r["name"], r["step"]) for r in map(json.loads, f)
      )
    self.assertEqual({k: n for k, n in rows.items() if n > 1}, {})
    with open(os.path.join(workdir, "report.json"), encoding="utf-8") as f:
      resumed = json.load(f)
    self.assertEqual(resumed["steps"], 3)
    # "before" is the untrained student's, as the first launch measured it.
    self.assertEqual(resumed["before"], first["before"])
    self.assertNotEqual(first["before"], first["after"])

    other = _smoke(workdir, max_steps=3)
    other.opd.canvas = "trace"
    with self.assertRaisesRegex(ValueError, r"opd\.canvas: checkpoint has"):
      opd.run(other)

  def _checkpoint_dirs(self):
    """A tiny converted student; a teacher directory with a tokenizer only."""
    root = self.create_tempdir().full_path
    tokenizer = tokenizer_lib.build_char_tokenizer()
    student, teacher = (os.path.join(root, n) for n in ("student", "teacher"))
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=len(tokenizer), num_layers=1),
        student,
        tokenizer=tokenizer,
    )
    tokenizer.save_pretrained(teacher)
    for path in (student, teacher):
      bd_config.save_settings(
          bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3), path
      )
    return student, teacher

  def test_bad_inputs_fail_before_anything_is_written(self):
    student, teacher = self._checkpoint_dirs()
    workdir = os.path.join(self.create_tempdir().full_path, "opd")
    config = _smoke(workdir)
    config.model.update(random_init=False, student=student, teacher=teacher)
    with self.assertRaisesRegex(ValueError, "block-diffusion checkpoint"):
      opd.run(config)
    os.remove(os.path.join(teacher, bd_config.SETTINGS_FILE))
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.chat_template = "{{ messages }}"
    tokenizer.save_pretrained(teacher)
    with self.assertRaisesRegex(ValueError, "tokenizers differ"):
      opd.run(config)
    smoke = _smoke(workdir)
    smoke.rollout.extra_stop_ids = (tokenizer.pad_token_id,)
    with self.assertRaisesRegex(ValueError, "pad id"):
      opd.run(smoke)
    smoke = _smoke(workdir)
    smoke.mesh.tp = 2  # Refused once the workdir is held: it is removed.
    with self.assertRaisesRegex(ValueError, r"^mesh\.fsdp \* mesh\.tp"):
      opd.run(smoke)
    self.assertFalse(os.path.exists(workdir))
    self.assertFalse(
        os.path.exists(
            os.path.join(workdir, "checkpoints", fingerprint_lib.FILE_NAME)
        )
    )


class OpdValidationTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("student", "student", "runs/quickstart/sft/export"),
      ("teacher", "teacher", "runs/quickstart/ar_pretrain/export"),
  )
  def test_missing_model_names_the_key_to_set(self, key, example):
    workdir = os.path.join(self.create_tempdir().full_path, "opd")
    config = _smoke(workdir)
    config.model.random_init = False
    other = "teacher" if key == "student" else "student"
    config.model[other] = self.create_tempdir().full_path
    config.model[key] = os.path.join(workdir, "missing")
    with self.assertRaisesRegex(ValueError, "quickstart") as raised:
      opd.run(config)
    message = str(raised.exception)
    self.assertIn(f"--config.model.{key}=DIR", message)
    self.assertIn(example, message)
    self.assertNotIn("`sft.py` first", message)
    self.assertFalse(os.path.exists(workdir))

  @parameterized.named_parameters(
      ("sdar", "sdar_tiny"), ("fast_dllm_v2", "fast_dllm_v2_tiny")
  )
  def test_a_block_diffusion_format_teacher_is_refused(self, name):
    workdir = os.path.join(self.create_tempdir().full_path, "opd")
    config = _smoke(workdir)
    config.model.random_init = False
    config.model.student = config.model.teacher = os.path.join(
        os.path.dirname(os.path.dirname(__file__)),
        "testdata",
        "bd_formats",
        name,
    )
    with self.assertRaisesRegex(
        ValueError, r"^model\.teacher=.* is a block-diffusion checkpoint in"
    ):
      opd.run(config)
    self.assertFalse(os.path.exists(workdir))

  @parameterized.parameters(
      ("rollout", "threshold", 1.5, ": threshold must be"),
      ("rollout", "rule", "best", ": rule must be"),
      ("rollout", "temperature", -1.0, ": temperature must be"),
      ("rollout", "extra_stop_ids", (-1,), " must be token ids"),
      ("rollout", "extra_stop_ids", (5, 5), r" has duplicates: \(5, 5\)"),
      ("corruption", "min_noise", 2.0, r" must be in \(0, 1\]"),
      ("eval", "thresholds", ("a",), r" must be numbers in \(0, 1\]"),
  )
  def test_bad_setting_names_the_key(self, section, name, value, message):
    workdir = os.path.join(self.create_tempdir().full_path, "opd")
    config = _smoke(workdir)
    config[section][name] = value
    with self.assertRaisesRegex(ValueError, rf"^{section}\.{name}{message}"):
      opd.run(config)
    self.assertFalse(os.path.exists(workdir))


if __name__ == "__main__":
  absltest.main()
