# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/completions.py: `generate`'s settings and output."""

import json
import os

from absl.testing import absltest
import numpy as np
from tunix_bd import config_files
from tunix_bd.evaluation import completions
from tunix_bd.generate import prompt_batches


def _config(**overrides):
  config = config_files.get_config("generate", "tiny")
  config.update(overrides)
  return config


def _records():
  return [
      {
          "messages": [{"role": "user", "content": "sort 31"}],
          "answer": "13",
          "task": "sort",
      },
      {
          "messages": [{"role": "user", "content": "reverse 12"}],
          "answer": "21",
          "task": "reverse",
      },
  ]


def _result(max_replay_error=None):
  return prompt_batches.DecodeResult(
      texts=["13", "12"],
      num_tokens=np.array([2, 3]),
      num_forwards=np.array([1, 3]),
      tokens_per_forward=np.array([2.0, 1.0]),
      seconds=0.5,
      max_replay_error=max_replay_error,
  )


class ValidateTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = self.create_tempdir().full_path
    self.checkpoint = self.create_tempdir().full_path

  def test_the_output_defaults_to_the_workdirs_completions(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = self.checkpoint
    settings = completions.validate(config)
    self.assertEqual(
        settings.output, os.path.join(self.workdir, "completions.jsonl")
    )
    self.assertEqual(settings.decode.max_new_tokens, 8)
    self.assertIsNone(settings.bd.block_size)
    self.assertFalse(settings.verify_replay)

  def test_a_decode_error_comes_before_the_checkpoints(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = "no/such/dir"
    config.decode.threshold = 2.0
    with self.assertRaisesRegex(ValueError, r"^decode\.threshold: "):
      completions.validate(config)
    config.decode.threshold = 0.9
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint='no/such/dir' is not a directory"
    ):
      completions.validate(config)

  def test_bad_sections_name_their_keys(self):
    config = _config(workdir=self.workdir)
    config.model.checkpoint = self.checkpoint
    config.bd.block_size = 0
    with self.assertRaisesRegex(ValueError, r"^bd\.block_size must be >= 1"):
      completions.validate(config)
    config = _config(output=self.workdir)  # A directory.
    with self.assertRaisesRegex(ValueError, r"^output="):
      completions.validate(config)


class OutputTest(absltest.TestCase):

  def test_one_line_per_prompt(self):
    path = os.path.join(self.create_tempdir().full_path, "c.jsonl")
    completions.write_completions(path, _records(), _result())
    with open(path) as f:
      rows = [json.loads(line) for line in f]
    self.assertEqual(
        rows,
        [
            dict(prompt="sort 31", answer="13", completion="13", correct=True,
                 task="sort", num_forwards=1, tokens_per_forward=2.0),
            dict(prompt="reverse 12", answer="21", completion="12",
                 correct=False, task="reverse", num_forwards=3,
                 tokens_per_forward=1.0),
        ],
    )  # fmt: skip

  def test_the_summary_and_its_lines(self):
    workdir = self.create_tempdir().full_path
    config = _config(workdir=workdir)
    config.model.checkpoint = workdir
    settings = completions.validate(config)
    summary, text = completions.summarize(
        _records(), _result(1.5e-7), settings, 8
    )
    self.assertEqual(
        summary,
        dict(exact_match=0.5, tokens_per_forward=1.5, tokens_per_s=10.0,
             max_replay_error=1.5e-7),
    )  # fmt: skip
    self.assertEqual(
        text.splitlines(),
        [
            (
                "generate: 2 prompts, block size 8, rule threshold (threshold"
                " 0.9), temperature 0.0, cached"
            ),
            "  exact match reverse    0.00%",
            "  exact match sort     100.00%",
            "  exact match all       50.00%",
            (
                "  tokens/forward 1.50, tokens/s 10.0; completions in"
                f" {settings.output}"
            ),
            "  replay: max |replayed - recorded| log-prob 1.50e-07",
        ],
    )
    summary, text = completions.summarize(_records(), _result(), settings, 8)
    self.assertNotIn("max_replay_error", summary)
    self.assertNotIn("replay", text)


if __name__ == "__main__":
  absltest.main()
