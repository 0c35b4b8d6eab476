# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for evaluation/completions.py: `generate`'s completions and summary."""

import json
import os

from absl.testing import absltest
import numpy as np
from tunix_bd.evaluation import completions
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as generate_settings


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
      correct=None,
  )


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

  def test_only_an_earlier_output_is_replaced(self):
    path = os.path.join(self.create_tempdir().full_path, "c.jsonl")
    completions.check_output(path)  # A new file.
    completions.write_completions(path, _records(), _result())
    completions.check_output(path)
    for content in (
        b'{"prompt": "sort 31", "answer": "13"}\n',  # The prompts file.
        b"\x08\x00\x00\x00\x00\x00\x00\x00{}",  # Weights (safetensors).
        b"[1]\n",
    ):
      other = self.create_tempfile(content=content, mode="wb").full_path
      with self.assertRaisesRegex(
          ValueError,
          rf"^output='{other}' exists and is not a completions file written",
      ):
        completions.check_output(other)

  def test_the_summary_names_the_rules_own_parameter(self):
    decode = generate_settings.DecodeSettings(rule="top_k", top_k=2)
    _, text = completions.summarize(
        _records(), _result(), decode, 8, "out/c.jsonl"
    )
    self.assertIn("rule top_k=2, temperature", text)

  def test_the_summary_and_its_lines(self):
    decode = generate_settings.DecodeSettings()
    summary, text = completions.summarize(
        _records(), _result(1.5e-7), decode, 8, "out/c.jsonl"
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
                "generate: 2 prompts, block size 8, rule threshold=0.9,"
                " temperature 0.0, cached"
            ),
            "  exact match reverse    0.00%",
            "  exact match sort     100.00%",
            "  exact match all       50.00%",
            "  tokens/forward 1.50, tokens/s 10.0; completions in out/c.jsonl",
            "  replay: max |replayed - recorded| log-prob 1.50e-07",
        ],
    )
    summary, text = completions.summarize(
        _records(), _result(), decode, 8, "out/c.jsonl"
    )
    self.assertNotIn("max_replay_error", summary)
    self.assertNotIn("replay", text)


if __name__ == "__main__":
  absltest.main()
