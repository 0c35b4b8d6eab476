# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO's prompt stream: rendering, checks, and a seeded, resumable order."""

import itertools
import json
import os
import re

from absl.testing import absltest
import numpy as np

from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.rl import prompt_stream


def _conversations(num=10):
  mix = tasks.TaskMix(tasks=("sort",), min_len=1, max_len=4)
  return dataset_lib.embedded_conversations(mix, "train", num)


class RenderTest(absltest.TestCase):

  def test_rendered_prompts_encode_like_the_chat_template(self):
    tok = tokenizer_lib.build_char_tokenizer()
    conversations = _conversations()
    rendered = prompt_stream.render(tok, conversations, 40)
    self.assertLen(rendered, 10)
    for text, answer, c in zip(
        rendered.prompts, rendered.answers, conversations
    ):
      self.assertEqual(answer, c.answer)
      self.assertEqual(
          tuple(tok.encode(text, add_special_tokens=False)),
          chat.encode_prompt(tok, c.messages[:-1]),
      )

  def test_long_prompt_and_empty_set_fail_naming_them(self):
    tok = tokenizer_lib.build_char_tokenizer()
    with self.assertRaisesRegex(
        ValueError, r"train\[0\].*rollout.max_prompt_length=5"
    ):
      prompt_stream.render(tok, _conversations(1), 5)
    with self.assertRaisesRegex(ValueError, "empty"):
      prompt_stream.render(tok, [], 40)

  def test_rl_jsonl_records_are_named_by_file_and_line(self):
    path = os.path.join(self.create_tempdir().full_path, "rl.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n" + json.dumps({"prompt": "sort 31", "answer": "13"}) + "\n")
      f.write(json.dumps({"prompt": "x" * 50, "answer": "x"}) + "\n")
    conversations = prompt_stream.jsonl_conversations(path)
    self.assertEqual(
        [c.where for c in conversations], [f"{path}:2", f"{path}:3"]
    )
    tok = tokenizer_lib.build_char_tokenizer()
    with self.assertRaisesRegex(
        ValueError, re.escape(f"{path}:3: the prompt has")
    ):
      prompt_stream.render(tok, conversations, 40)

  def test_rl_jsonl_records_become_conversations(self):
    path = os.path.join(self.create_tempdir().full_path, "rl.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write(json.dumps({"prompt": "sort 31", "answer": "13"}) + "\n")
      f.write(json.dumps({"prompt": "reverse 12"}) + "\n")
    with self.assertRaisesRegex(ValueError, "answer"):
      prompt_stream.jsonl_conversations(path)


class ItemsTest(absltest.TestCase):

  def test_items_are_seeded_epochs_and_restart_identically(self):
    tok = tokenizer_lib.build_char_tokenizer()
    rendered = prompt_stream.render(tok, _conversations(10), 40)
    first = list(
        itertools.islice(prompt_stream.items(rendered, batch_size=4, seed=3), 5)
    )
    again = list(
        itertools.islice(prompt_stream.items(rendered, batch_size=4, seed=3), 5)
    )
    other = list(
        itertools.islice(prompt_stream.items(rendered, batch_size=4, seed=4), 5)
    )
    for a, b in zip(first, again):
      np.testing.assert_array_equal(a["prompts"], b["prompts"])
    self.assertFalse(
        all(
            np.array_equal(a["prompts"], b["prompts"])
            for a, b in zip(first, other)
        )
    )
    for item in first:
      self.assertIsInstance(item["prompts"], np.ndarray)
      self.assertEqual(item["prompts"].shape, (4,))
      self.assertEqual(item["answer"].shape, (4,))
    # The first 10 rows of the stream are one epoch: every prompt once.
    stream = np.concatenate([item["prompts"] for item in first])[:10]
    self.assertCountEqual(stream.tolist(), rendered.prompts.tolist())


if __name__ == "__main__":
  absltest.main()
