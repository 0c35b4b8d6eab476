# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for the `sft` recipe: a user's chat template, and run bookkeeping.

A tiny AR export with the embedded tokenizer is converted with Qwen3's own
chat template and its thinking switch off: the run trains, and its export
carries the template it was trained with. A failed launch leaves no
fingerprint, and a resumed run says so, logs one metrics row per step and
gives the uninterrupted run's losses (docs/design.md invariant 7).
Bad settings fail before compute, naming the config key at fault.
"""

import collections
import contextlib
import io
import json
import os
import shutil
import tempfile

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd import config_files
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.recipes import sft
from tunix_bd.training import metrics
from tunix_bd_tests import test_common

_QWEN3_TEMPLATE = os.path.join(
    os.path.dirname(os.path.dirname(__file__)),
    "testdata",
    "qwen3_chat",
    "chat_template.jinja",
)


def _tiny(workdir: str, checkpoint: str, num_eval: int):
  """The `tiny` run on Qwen3's chat template, its thinking switch off.

  Also bf16 compute on float32 master weights, remat, a chunked head whose
  last chunk overlaps (50 columns of 128) and Splash attention.
  """
  config = config_files.get_config("sft", "tiny")
  config.workdir = workdir
  config.model.checkpoint = checkpoint
  config.model.update(
      dtype="bfloat16", remat="block", logits_chunk=50, attention="splash"
  )
  config.data.update(
      num_eval=num_eval, chat_template=_QWEN3_TEMPLATE, enable_thinking=False
  )
  config.train.update(max_steps=2, warmup_steps=1, checkpoint_every_n_steps=1)
  return config


class SftRecipeTest(absltest.TestCase):
  """The recipe's one end-to-end run: a failed launch, a run, a resume."""

  def test_a_failed_launch_leaves_no_fingerprint_and_a_resume_its_losses(self):
    root = self.create_tempdir().full_path
    tokenizer = tokenizer_lib.build_char_tokenizer()
    ar_dir = os.path.join(root, "ar")
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=len(tokenizer), seed=2),
        ar_dir,
        tokenizer=tokenizer,
    )
    workdir = os.path.join(root, "sft")
    record = os.path.join(workdir, "checkpoints", fingerprint_lib.FILE_NAME)
    failing = _tiny(workdir, ar_dir, num_eval=4)  # < eval.batch_size (8).
    with self.assertRaisesRegex(ValueError, "batch_size"):
      sft.run(failing)
    self.assertFalse(os.path.exists(record))

    # The corrected relaunch runs (its data differs from the failed one's).
    losses = sft.run(_tiny(workdir, ar_dir, num_eval=8))
    self.assertTrue(os.path.exists(record))
    self.assertTrue(np.isfinite(losses["train_loss"]))
    straight = dict(metrics.read_metrics(workdir, "/train/loss"))
    self._check_export_and_fingerprint(workdir)
    # Killed after step 2, before its checkpoint was written.
    shutil.rmtree(os.path.join(workdir, "checkpoints", "2"))
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      sft.run(_tiny(workdir, ar_dir, num_eval=8))
    self.assertIn(
        f"sft: resumed from step 1 (workdir {workdir})", stdout.getvalue()
    )
    rows = collections.Counter(
        (r["name"], r["step"]) for r in metrics.read_records(workdir)
    )
    self.assertEqual({k: n for k, n in rows.items() if n > 1}, {})
    for step in (1, 2):
      self.assertIn(("/train/loss", step), rows)
    self.assertIn(("/eval/loss", 1), rows)
    # Invariant 7: the resumed run's losses are the uninterrupted run's.
    again = dict(metrics.read_metrics(workdir, "/train/loss"))
    self.assertEqual(sorted(straight), [1, 2])
    self.assertEqual(sorted(again), [1, 2])
    for step in (1, 2):
      self.assertAlmostEqual(again[step], straight[step], places=5)

  def _check_export_and_fingerprint(self, workdir):
    """The export carries the precision and the template trained with."""
    export_dir = os.path.join(workdir, "export")
    with open(os.path.join(export_dir, "block_diffusion.json")) as f:
      self.assertEqual(
          json.load(f)["precision"],
          dict(dtype="bfloat16", remat="block", logits_chunk=50),
      )
    with open(_QWEN3_TEMPLATE, encoding="utf-8") as f:
      template = f.read()
    exported = tokenizer_lib.load_tokenizer(export_dir)
    self.assertEqual(exported.chat_template, template)
    # Generation from the export, with the switch, renders the prompt SFT
    # trained on: the empty think block closes it.
    messages = [{"role": "user", "content": "sort 31"}]
    prompt = exported.decode(
        list(
            chat.encode_prompt(
                exported, messages, chat.ChatOptions(enable_thinking=False)
            )
        )
    )
    self.assertEndsWith(
        prompt, "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    # The fingerprint holds the template by content, not by path.
    path = os.path.join(workdir, "checkpoints", "fingerprint.json")
    with open(path, encoding="utf-8") as f:
      fields = json.load(f)["fields"]
    self.assertStartsWith(fields["data"]["chat_template"], "sha256:")
    self.assertIs(fields["data"]["enable_thinking"], False)
    self.assertEqual(fields["model"]["dtype"], "bfloat16")


def _tiny_config(workdir: str, checkpoint: str):
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
    # Its own directory: other modules of the same pytest process write
    # exports under the default test tmpdir too.
    cls.export = os.path.join(
        tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir()), "ar_export"
    )
    export.save_checkpoint(
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
      ("model", "dtype", "float64", r"model\.dtype must be one of"),
      ("model", "remat", "layer", r"model\.remat must be one of"),
      ("model", "logits_chunk", -1, r"model\.logits_chunk must be"),
      ("export", "format", "gguf", r"export\.format='gguf' must be one of"),
      (
          "export",
          "format",
          "sdar",
          r"export\.format='sdar' \(SDAR\) holds same_position logits.*"
          r"bd\.alignment=same_position",
      ),
      (
          "export",
          "format",
          "fast_dllm_v2",
          r"export\.format='fast_dllm_v2' \(Fast-dLLM v2\) has Qwen2 layers",
      ),
      ("export", "reference_code", "/nonexistent", r"export\.reference_code"),
      ("model", "attention", "flash", r"model\.attention must be one of"),
  )
  def test_bad_setting_names_the_key(self, section, key, value, regex):
    config = _tiny_config(self.workdir, self.export)
    config[section][key] = value
    with self.assertRaisesRegex(ValueError, "^" + regex):
      sft.run(config)
    self.assertFalse(os.path.exists(self.workdir))

  def test_eval_batch_larger_than_the_held_out_set_names_eval_batch_size(
      self,
  ):
    config = _tiny_config(self.workdir, self.export)
    num_eval = config.data.num_eval
    config.eval.batch_size = num_eval + 1
    with self.assertRaisesRegex(
        ValueError,
        rf"^eval\.batch_size={num_eval + 1} exceeds the {num_eval} examples",
    ):
      sft.run(config)

  def test_eval_batch_larger_than_the_packed_rows_names_data_packing(self):
    # Rows of 112 tokens hold 3 examples: 16 held-out examples fill fewer
    # than 8 rows.
    config = _tiny_config(self.workdir, self.export)
    config.data.max_length = 112
    config.eval.batch_size = 8
    with self.assertRaisesRegex(
        ValueError,
        r"^eval\.batch_size=8 exceeds the [1-7] rows that the 16 examples of"
        r" its dataset pack into \(data\.packing=True\)",
    ):
      sft.run(config)
    self.assertFalse(os.path.exists(self.workdir))

  def test_rows_longer_than_the_models_positions_name_data_max_length(self):
    checkpoint = os.path.join(self.create_tempdir().full_path, "short")
    shutil.copytree(self.export, checkpoint)
    with open(os.path.join(checkpoint, "config.json")) as f:
      hf_config = json.load(f)
    with open(os.path.join(checkpoint, "config.json"), "w") as f:
      json.dump(dict(hf_config, max_position_embeddings=32), f)
    config = _tiny_config(self.workdir, checkpoint)
    with self.assertRaisesRegex(
        ValueError,
        r"^rows of data\.max_length=56 tokens need 56 positions, but"
        r" model\.checkpoint's config\.json declares"
        r" max_position_embeddings=32: lower data\.max_length\.$",
    ):
      sft.run(config)
    self.assertFalse(os.path.exists(self.workdir))

  def test_empty_checkpoint_directory_says_it_has_no_tokenizer(self):
    config = _tiny_config(self.workdir, self.create_tempdir().full_path)
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint=.* has no tokenizer"
    ) as raised:
      sft.run(config)
    self.assertNotIn("sentencepiece", str(raised.exception))
    self.assertFalse(os.path.exists(self.workdir))


if __name__ == "__main__":
  absltest.main()
