# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO's prompt stream: rendering, checks, and a seeded, resumable order."""

import itertools
import json
import os
import re

from absl.testing import absltest
import numpy as np

from tunix_bd import config_utils
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
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
    conversations = _rl_jsonl(path)
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
      _rl_jsonl(path)


def _rl_jsonl(path):
  """The train conversations of an RL JSONL file (`data.prompts`)."""
  data = config_utils.to_section(data_settings.RlData)
  data.update(prompts=path, eval=path)
  return prompt_stream.conversations(data, num_eval=1)[0]


def _write(path, records):
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  return path


class ConversationsTest(absltest.TestCase):
  """Which sets GRPO reads: every set given, and never the wrong one."""

  def setUp(self):
    super().setUp()
    root = self.create_tempdir().full_path
    rl = [
        {"prompt": f"sort {n}", "answer": "".join(sorted(str(n)))}
        for n in (31, 413, 52)
    ]
    self.prompts = _write(os.path.join(root, "rl.jsonl"), rl)
    self.held_out = _write(
        os.path.join(root, "held_out.jsonl"),
        [
            {"prompt": "sort 97", "answer": "79"},
            {"prompt": "sort 21", "answer": "12"},
        ],
    )
    self.chat = _write(
        os.path.join(root, "chat.jsonl"),
        [{"prompt": "reverse 12", "completion": "21"}],
    )
    self.data = config_utils.to_section(
        data_settings.RlData,
        num_train=4,
        num_eval=2,
    )

  def test_held_out_file_is_read_beside_rl_prompts(self):
    self.data.update(prompts=self.prompts, eval=self.held_out)
    train, held_out = prompt_stream.conversations(self.data, num_eval=2)
    self.assertEqual([c.answer for c in train], ["13", "134", "25"])
    self.assertEqual([c.answer for c in held_out], ["79", "12"])
    self.assertEqual(
        [c.messages[0]["content"] for c in held_out], ["sort 97", "sort 21"]
    )
    self.assertEqual({c.task for c in held_out}, {dataset_lib.JSONL_TASK})

  def test_held_out_file_may_be_chat(self):
    self.data.update(prompts=self.prompts, eval=self.chat)
    _, held_out = prompt_stream.conversations(self.data, num_eval=1)
    self.assertEqual([c.answer for c in held_out], ["21"])

  def test_rl_prompts_without_a_held_out_file_fail(self):
    self.data.prompts = self.prompts
    with self.assertRaisesRegex(
        ValueError, r"^data\.eval must be set when data\.prompts is a file"
    ):
      prompt_stream.conversations(self.data, num_eval=2)

  def test_two_train_files_fail_naming_both(self):
    self.data.update(prompts=self.prompts, train=self.chat, eval=self.chat)
    with self.assertRaisesRegex(ValueError, r"data\.prompts=.*data\.train="):
      prompt_stream.conversations(self.data, num_eval=1)

  def test_too_few_held_out_prompts_name_eval_num_prompts(self):
    self.data.update(prompts=self.prompts, eval=self.held_out)
    with self.assertRaisesRegex(
        ValueError, r"^eval\.num_prompts=3 but data\.eval=.* holds 2"
    ):
      prompt_stream.conversations(self.data, num_eval=3)

  def test_embedded_sets_by_default(self):
    train, held_out = prompt_stream.conversations(self.data, num_eval=2)
    self.assertEqual(
        [c.where for c in train], [f"train[{i}]" for i in range(4)]
    )
    self.assertEqual([c.where for c in held_out], ["eval[0]", "eval[1]"])


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
