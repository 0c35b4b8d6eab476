# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarks.caesar, the own-task guide's data generator."""

import os

from absl.testing import absltest
from absl.testing import flagsaver
from absl.testing import parameterized
from benchmarks import caesar
from tunix_bd.data import jsonl


class CaesarTest(parameterized.TestCase):

  def test_shift_wraps_and_inverts(self):
    self.assertEqual(caesar.shift_word("hello", 3), "khoor")
    self.assertEqual(caesar.shift_word("xyz", 3), "abc")
    self.assertEqual(caesar.shift_word(caesar.shift_word("abc", 7), 19), "abc")

  def test_pairs_are_distinct_seeded_and_in_their_split(self):
    for split in caesar.SPLITS:
      pairs = list(caesar.pairs(split, 300, seed=1))
      self.assertEqual(pairs, list(caesar.pairs(split, 300, seed=1)))
      self.assertLen({p for p, _ in pairs}, 300)
      for prompt, answer in pairs:
        self.assertEqual(caesar.split_of(prompt), split)
        _, shift, word = prompt.split()
        self.assertBetween(len(word), caesar.MIN_LETTERS, caesar.MAX_LETTERS)
        self.assertEqual(answer, caesar.shift_word(word, int(shift)))

  def test_files_are_what_the_recipes_read_and_smaller_sets_nest(self):
    out = self.create_tempdir().full_path
    paths = caesar.write_dataset(os.path.join(out, "a"), 40, 8)
    small = caesar.write_dataset(os.path.join(out, "b"), 10, 8)
    train = jsonl.read_jsonl(paths["train"], kind="sft")
    self.assertLen(train, 40)
    self.assertEqual(jsonl.read_jsonl(small["train"], kind="sft"), train[:10])
    prompts = jsonl.read_jsonl(paths["prompts"], kind="rl")
    held_out = jsonl.read_jsonl(paths["eval"], kind="sft")
    self.assertEqual(
        [r["answer"] for r in prompts],
        [r["messages"][-1]["content"] for r in held_out],
    )
    seen = {r["messages"][0]["content"] for r in train}
    self.assertFalse(seen & {r["messages"][0]["content"] for r in held_out})

  @parameterized.parameters(("num_train", 0, 8), ("num_eval", 8, 0))
  def test_counts_below_one_are_refused(self, name, num_train, num_eval):
    with self.assertRaisesRegex(ValueError, name):
      caesar.write_dataset(self.create_tempdir().full_path, num_train, num_eval)

  def test_command_line_mistakes_are_one_line(self):
    a_file = self.create_tempfile().full_path
    for flag_values, message in (
        ({"num_train": 0}, "num_train must be >= 1"),
        ({"out": a_file}, "File exists"),
    ):
      with flagsaver.flagsaver(**flag_values):
        with self.assertRaisesRegex(SystemExit, f"^caesar: error: .*{message}"):
          caesar.main(["caesar"])


if __name__ == "__main__":
  absltest.main()
