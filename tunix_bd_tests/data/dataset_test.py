# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.dataset: token rows and grain batch pipelines."""

import json
import os
import re
import types

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd import config_utils
from tunix_bd.data import chat
from tunix_bd.data import dataset
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tasks
from tunix_bd.data import tokenizer as tokenizer_lib

_MAX_LENGTH = 48
_NUM_EXAMPLES = 12


def _conversation(prompt: str, answer: str, where: str):
  messages = [
      {"role": "user", "content": prompt},
      {"role": "assistant", "content": answer},
  ]
  return dataset.Conversation(messages, "test", where)


class DatasetTestBase(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tokenizer = tokenizer_lib.build_char_tokenizer()
    # Distinct answers make every row distinct, so rows identify examples.
    self.conversations = [
        _conversation(f"sort {i}{i + 10}", f"{i:02d}" * (1 + i % 3), f"r{i}")
        for i in range(_NUM_EXAMPLES)
    ]
    self.data = dataset.tokenize(
        self.tokenizer, self.conversations, _MAX_LENGTH
    )

  def _indices(self, tokens: np.ndarray) -> list[int]:
    """Maps `[batch, length]` token rows back to example indices."""
    out = []
    for row in tokens:
      matches = np.flatnonzero((self.data.tokens == row).all(axis=1))
      self.assertLen(matches, 1)
      out.append(int(matches[0]))
    return out

  def _epoch_rows(self, ds, num_batches: int) -> list[int]:
    return sum((self._indices(ds[i]["tokens"]) for i in range(num_batches)), [])


class TokenizeTest(DatasetTestBase):

  def test_rows_match_encode_conversation_and_pad_with_pad_id(self):
    self.assertLen(self.data, _NUM_EXAMPLES)
    self.assertEqual(self.data.max_length, _MAX_LENGTH)
    self.assertEqual(self.data.tokens.shape, (_NUM_EXAMPLES, _MAX_LENGTH))
    self.assertEqual(self.data.tokens.dtype, np.int32)
    self.assertEqual(self.data.conversations, tuple(self.conversations))
    pad = self.tokenizer.pad_token_id
    for i, conversation in enumerate(self.conversations):
      prompt_ids, completion_ids = chat.encode_conversation(
          self.tokenizer, conversation.messages
      )
      ids = list(prompt_ids + completion_ids)
      self.assertEqual(self.data.tokens[i, : len(ids)].tolist(), ids)
      self.assertTrue((self.data.tokens[i, len(ids) :] == pad).all())
      self.assertEqual(self.data.prompt_lengths[i], len(prompt_ids))
      self.assertEqual(self.data.lengths[i], len(prompt_ids + completion_ids))

  def test_row_masks_are_consistent_with_encoding(self):
    for i, conversation in enumerate(self.conversations):
      prompt_ids, completion_ids = chat.encode_conversation(
          self.tokenizer, conversation.messages
      )
      row = self.data.row(i)
      self.assertCountEqual(row, ["tokens", "completion_mask", "valid_mask"])
      valid, completion = row["valid_mask"], row["completion_mask"]
      self.assertEqual(valid.dtype, bool)
      self.assertEqual(completion.dtype, bool)
      # Brute force: position by position.
      for p in range(_MAX_LENGTH):
        self.assertEqual(valid[p], p < len(prompt_ids + completion_ids))
        self.assertEqual(
            completion[p],
            len(prompt_ids) <= p < len(prompt_ids + completion_ids),
        )
      self.assertEqual(row["tokens"][completion].tolist(), list(completion_ids))
      self.assertEqual(
          row["tokens"][valid & ~completion].tolist(),
          list(prompt_ids),
      )
      self.assertEqual(
          row["tokens"][completion][-1], self.tokenizer.eos_token_id
      )

  def test_exact_fit_has_no_padding(self):
    longest = int(self.data.lengths.max())
    data = dataset.tokenize(self.tokenizer, self.conversations, longest)
    row = self.data.lengths.argmax()
    self.assertTrue(data.row(row)["valid_mask"].all())
    np.testing.assert_array_equal(data.tokens, self.data.tokens[:, :longest])

  def test_over_long_record_is_rejected_naming_it(self):
    conversations = list(self.conversations)
    conversations[5] = _conversation("sort 1", "1" * 40, "big.jsonl record 6")
    with self.assertRaisesRegex(
        ValueError,
        r"big\.jsonl record 6: \d+ tokens do not fit in data\.max_length=48",
    ):
      dataset.tokenize(self.tokenizer, conversations, _MAX_LENGTH)

  def test_one_token_too_long_is_rejected(self):
    longest = int(self.data.lengths.max())
    where = self.conversations[int(self.data.lengths.argmax())].where
    with self.assertRaisesRegex(
        ValueError, f"{where}: {longest} tokens do not fit"
    ):
      dataset.tokenize(self.tokenizer, self.conversations, longest - 1)

  def test_malformed_record_is_rejected_naming_it(self):
    bad = dataset.Conversation(
        [{"role": "user", "content": "q"}], "test", "train[3]"
    )
    with self.assertRaisesRegex(
        ValueError, r"train\[3\]: the conversation has no final assistant"
    ):
      dataset.tokenize(self.tokenizer, [*self.conversations, bad], 48)

  def test_bad_arguments_raise(self):
    with self.assertRaisesRegex(ValueError, "data.max_length must be >= 2"):
      dataset.tokenize(self.tokenizer, self.conversations, 1)
    with self.assertRaisesRegex(ValueError, "no conversations"):
      dataset.tokenize(self.tokenizer, [], _MAX_LENGTH)

  def test_embedded_conversations(self):
    mix = tasks.TaskMix(seed=2)
    conversations = dataset.embedded_conversations(mix, "eval", 5)
    for i, (conversation, example) in enumerate(
        zip(conversations, mix.examples("eval", 5))
    ):
      self.assertEqual(conversation.messages, example.messages())
      self.assertEqual(conversation.task, example.task)
      self.assertEqual(conversation.answer, example.answer)
      self.assertEqual(conversation.where, f"eval[{i}]")
    data = dataset.tokenize(self.tokenizer, conversations, 64)
    self.assertLen(data, 5)

  def test_jsonl_conversations_are_named_by_file_and_line(self):
    path = os.path.join(self.create_tempdir().full_path, "d.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write(json.dumps({"prompt": "a", "completion": "b"}) + "\n\n")
      f.write(json.dumps({"prompt": "c", "completion": "é"}) + "\n")
    data = types.SimpleNamespace(train=path)
    conversations = dataset.split_conversations(data, "train")
    self.assertEqual([c.task for c in conversations], ["jsonl", "jsonl"])
    self.assertEqual(conversations[0].answer, "b")
    self.assertEqual(
        [c.where for c in conversations],
        [f"{path}:1", f"{path}:3"],  # Line 2 is blank.
    )
    with self.assertRaisesRegex(
        ValueError, re.escape(f"{path}:3: ") + "the assistant turn"
    ):
      dataset.tokenize(self.tokenizer, conversations, _MAX_LENGTH)


class ChatOptionsTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    # Qwen3's own template, whose thinking switch moves an empty think block.
    self.tokenizer = tokenizer_lib.load_tokenizer(
        os.path.join(
            os.path.dirname(os.path.dirname(__file__)), "testdata", "qwen3_chat"
        )
    )

  def _data(self, **fields):
    return config_utils.to_section(
        data_settings.Data,
        num_train=4,
        num_eval=2,
        max_length=64,
        **fields,
    )

  @parameterized.parameters(None, True, False)
  def test_tokenized_splits_pass_data_enable_thinking(self, enable_thinking):
    data = self._data(enable_thinking=enable_thinking)
    train, held_out = dataset.tokenized_splits(self.tokenizer, data)
    options = chat.ChatOptions(enable_thinking=enable_thinking)
    for rows in (train, held_out):
      for i, conversation in enumerate(rows.conversations):
        prompt = chat.encode_prompt(
            self.tokenizer, conversation.messages[:-1], options
        )
        self.assertEqual(rows.prompt_lengths[i], len(prompt))
        np.testing.assert_array_equal(rows.tokens[i, : len(prompt)], prompt)
        completion = self.tokenizer.decode(
            rows.tokens[i, len(prompt) : rows.lengths[i]].tolist()
        )
        think = "" if enable_thinking is False else "<think>\n\n</think>\n\n"
        self.assertEqual(completion, think + conversation.answer + "<|im_end|>")

  def test_bad_enable_thinking_is_refused_naming_the_key(self):
    with self.assertRaisesRegex(ValueError, r"data\.enable_thinking"):
      dataset.tokenized_splits(self.tokenizer, self._data(enable_thinking=1))

  def test_the_checked_settings_read_as_their_section(self):
    # Recipes pass their typed `data` (defaults for any key a config omits).
    section = self._data(enable_thinking=False)
    typed = config_utils.from_section(data_settings.Data, section, "data")
    for got, want in zip(
        dataset.tokenized_splits(self.tokenizer, typed),
        dataset.tokenized_splits(self.tokenizer, section),
    ):
      np.testing.assert_array_equal(got.tokens, want.tokens)
      self.assertEqual(got.conversations, want.conversations)


class ConversationsTest(parameterized.TestCase):
  """Every set a `data` section names is read, or its launch fails."""

  def setUp(self):
    super().setUp()
    self.path = os.path.join(self.create_tempdir().full_path, "eval.jsonl")
    with open(self.path, "w", encoding="utf-8") as f:
      f.write(json.dumps({"prompt": "sort 31", "completion": "13"}) + "\n")
    self.data = config_utils.to_section(
        data_settings.Data, num_train=3, num_eval=2
    )

  def test_eval_file_alone_is_read(self):
    self.data.eval = self.path
    train, held_out = dataset.conversations(self.data)
    self.assertEqual(
        [c.where for c in train], ["train[0]", "train[1]", "train[2]"]
    )
    self.assertEqual([c.answer for c in held_out], ["13"])

  def test_train_file_needs_an_eval_file(self):
    self.data.train = self.path
    with self.assertRaisesRegex(ValueError, r"^data\.eval must be set"):
      dataset.conversations(self.data)

  def test_a_recipe_without_held_out_set_refuses_data_eval(self):
    self.data.eval = self.path
    with self.assertRaisesRegex(ValueError, r"^data\.eval=.*bench_sft"):
      dataset.train_conversations(self.data, "bench_sft")
    self.data.update(eval="", train=self.path)
    self.assertLen(dataset.train_conversations(self.data, "bench_sft"), 1)


class BatchesTest(DatasetTestBase):

  def test_batch_shapes_and_consistency_with_rows(self):
    ds = dataset.batches(self.data, 4, seed=0)
    batch = ds[0]
    self.assertCountEqual(batch, ["tokens", "completion_mask", "valid_mask"])
    for value in batch.values():
      self.assertEqual(value.shape, (4, _MAX_LENGTH))
    for row, index in enumerate(self._indices(batch["tokens"])):
      expected = self.data.row(index)
      for key in batch:
        np.testing.assert_array_equal(batch[key][row], expected[key])

  def test_deterministic_for_a_seed(self):
    first = dataset.batches(self.data, 4, seed=7, num_epochs=3)
    again = dataset.batches(self.data, 4, seed=7, num_epochs=3)
    other = dataset.batches(self.data, 4, seed=8, num_epochs=3)
    self.assertLen(first, 9)
    order = self._epoch_rows(first, 9)
    self.assertEqual(self._epoch_rows(again, 9), order)
    self.assertEqual(
        [self._indices(b["tokens"]) for b in first],
        [order[i : i + 4] for i in range(0, 36, 4)],
    )
    self.assertNotEqual(self._epoch_rows(other, 9), order)
    # Random access (a resumed run) matches iteration.
    self.assertEqual(self._indices(again[5]["tokens"]), order[20:24])

  @parameterized.parameters(None, 3)
  def test_every_example_once_per_epoch_and_epochs_reshuffle(self, epochs):
    ds = dataset.batches(self.data, 3, seed=1, num_epochs=epochs)
    order = self._epoch_rows(ds, 12)
    epoch_orders = [order[e * 12 : (e + 1) * 12] for e in range(3)]
    for epoch_order in epoch_orders:
      self.assertCountEqual(epoch_order, range(_NUM_EXAMPLES))
    self.assertLen({tuple(o) for o in epoch_orders}, 3)
    self.assertNotEqual(epoch_orders[0], list(range(_NUM_EXAMPLES)))

  def test_partial_epochs_keep_the_example_stream(self):
    # 12 is not a multiple of 5: batches straddle epochs, none is lost.
    ds = dataset.batches(self.data, 5, seed=4)
    order = self._epoch_rows(ds, 24)
    self.assertCountEqual(order[:12], range(_NUM_EXAMPLES))
    self.assertCountEqual(order[12:24], range(_NUM_EXAMPLES))

  def test_one_unshuffled_epoch_preserves_order(self):
    ds = dataset.batches(self.data, 5, seed=0, num_epochs=1, shuffle=False)
    self.assertLen(ds, 2)  # The last partial batch is dropped.
    self.assertEqual(self._epoch_rows(ds, 2), list(range(10)))
    batches = list(ds)
    self.assertLen(batches, 2)
    np.testing.assert_array_equal(batches[1]["tokens"], self.data.tokens[5:10])

  @parameterized.parameters(
      (0, "batch_size must be >= 1, got 0"),
      (-2, "batch_size must be >= 1, got -2"),
      (_NUM_EXAMPLES + 1, "batch_size=13 exceeds the 12 examples"),
  )
  def test_bad_batch_size_raises(self, batch_size, regex):
    with self.assertRaisesRegex(ValueError, regex):
      dataset.batches(self.data, batch_size, seed=0)

  def test_batch_size_error_names_the_key(self):
    with self.assertRaisesRegex(
        ValueError, r"^eval\.batch_size=13 exceeds the 12 examples"
    ):
      dataset.batches(self.data, 13, seed=0, key="eval.batch_size")

  def test_whole_dataset_batch(self):
    ds = dataset.batches(self.data, _NUM_EXAMPLES, seed=0, num_epochs=1)
    self.assertLen(ds, 1)
    self.assertCountEqual(self._indices(ds[0]["tokens"]), range(12))


if __name__ == "__main__":
  absltest.main()
