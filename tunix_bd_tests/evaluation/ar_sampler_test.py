# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.evaluation.ar_sampler's evaluation records.

Greedy decoding itself is checked end to end by `ar_pretrain_test`, which
reads the `eval.json` that `write_exact_match` writes.
"""

from absl.testing import absltest
from tunix_bd.evaluation import ar_sampler
from tunix_bd.data import dataset


def _conversation(prompt: str, answer: str, task: str):
  messages = [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": prompt},
      {"role": "assistant", "content": answer},
  ]
  return dataset.Conversation(messages, task, f"{task}[0]")


class PredictionRecordsTest(absltest.TestCase):

  def test_one_record_per_conversation_in_order(self):
    conversations = [
        _conversation("sort 31", "13", "sort"),
        _conversation("reverse ab", "ba", "reverse"),
    ]
    records = ar_sampler.prediction_records(conversations, ["13", "ab"])
    self.assertEqual(
        records,
        [
            {
                "prompt": "sort 31",
                "answer": "13",
                "prediction": "13",
                "task": "sort",
            },
            {
                "prompt": "reverse ab",
                "answer": "ba",
                "prediction": "ab",
                "task": "reverse",
            },
        ],
    )
    # Key order is what eval.json shows.
    self.assertEqual(
        list(records[0]), ["prompt", "answer", "prediction", "task"]
    )


if __name__ == "__main__":
  absltest.main()
