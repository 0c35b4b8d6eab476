# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.jsonl: reading users' JSONL datasets."""

import json
import os
import re

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd.data import jsonl

_CHAT = {
    "messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ]
}
_GOOD_SFT = json.dumps({"prompt": "hi", "completion": "yo"})
_GOOD_RL = json.dumps({"prompt": "hi", "answer": "yo"})


class ReadJsonlTest(parameterized.TestCase):

  def _write(self, text: str) -> str:
    path = os.path.join(self.create_tempdir().full_path, "data.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    return path

  def _lines(self, *records) -> str:
    return "".join(
        (r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records
    )

  def test_sft_messages_format(self):
    extra = {
        "messages": [
            {"role": "user", "content": "q", "name": "x"},
            {"role": "assistant", "content": "a"},
        ],
        "id": 7,
    }
    path = self._write(self._lines(_CHAT, extra))
    self.assertEqual(
        jsonl.read_jsonl(path),
        [
            _CHAT,
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": "a"},
                ]
            },
        ],
    )

  def test_sft_prompt_completion_format(self):
    path = self._write(
        self._lines({"prompt": "sort 21", "completion": "12", "extra": 1})
    )
    self.assertEqual(
        jsonl.read_jsonl(path, kind="sft"),
        [{
            "messages": [
                {"role": "user", "content": "sort 21"},
                {"role": "assistant", "content": "12"},
            ]
        }],
    )

  def test_rl_string_and_messages_prompts(self):
    turns = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "add 1+2"},
    ]
    path = self._write(
        self._lines(
            {"prompt": "sort 21", "answer": "12"},
            {"prompt": turns, "answer": "3"},
        )
    )
    self.assertEqual(
        jsonl.read_jsonl(path, kind="rl"),
        [
            {
                "messages": [{"role": "user", "content": "sort 21"}],
                "answer": "12",
            },
            {"messages": turns, "answer": "3"},
        ],
    )

  def test_blank_lines_are_skipped(self):
    path = self._write(
        "\n" + _GOOD_SFT + "\n   \n\t\n" + json.dumps(_CHAT) + "\n\n"
    )
    records = jsonl.read_jsonl(path)
    self.assertLen(records, 2)
    self.assertEqual(records[1], _CHAT)

  def test_last_line_without_newline_is_read(self):
    path = self._write(_GOOD_RL + "\n" + _GOOD_RL)
    self.assertLen(jsonl.read_jsonl(path, kind="rl"), 2)

  def test_line_numbers_count_blank_lines(self):
    path = self._write(_GOOD_SFT + "\n\n\n{not json\n")
    with self.assertRaisesRegex(
        ValueError, re.escape(f"{path}:4: invalid JSON")
    ):
      jsonl.read_jsonl(path)

  @parameterized.named_parameters(
      ("invalid_json", "sft", '{"prompt": "a",', "invalid JSON"),
      ("array_line", "sft", "[1, 2]", "expected a JSON object"),
      ("string_line", "rl", '"hello"', "expected a JSON object"),
      (
          "no_known_fields",
          "sft",
          {"question": "a", "response": "b"},
          r"expected a 'messages' list or 'prompt' and 'completion' "
          r"fields, got keys \['question', 'response'\]",
      ),
      (
          "missing_completion",
          "sft",
          {"prompt": "a"},
          r"field 'completion' must be a string",
      ),
      (
          "missing_prompt",
          "sft",
          {"completion": "a"},
          r"field 'prompt' must be a string",
      ),
      (
          "empty_completion",
          "sft",
          {"prompt": "a", "completion": " \n"},
          r"field 'completion' is empty",
      ),
      (
          "completion_not_string",
          "sft",
          {"prompt": "a", "completion": 4},
          r"field 'completion' must be a string",
      ),
      (
          "prompt_not_string",
          "sft",
          {"prompt": ["a"], "completion": "b"},
          r"field 'prompt' must be a string",
      ),
      (
          "messages_not_list",
          "sft",
          {"messages": "hi"},
          r"'messages' must be a non-empty list",
      ),
      (
          "messages_end_with_user",
          "sft",
          {"messages": [{"role": "user", "content": "a"}]},
          r"the conversation has no final assistant turn",
      ),
      (
          "message_content_not_string",
          "sft",
          {
              "messages": [
                  {"role": "user", "content": None},
                  {"role": "assistant", "content": "b"},
              ]
          },
          r"message 0 has no string 'content'",
      ),
      ("rl_missing_answer", "rl", {"prompt": "a"}, r"missing field 'answer'"),
      ("rl_missing_prompt", "rl", {"answer": "a"}, r"missing field 'prompt'"),
      (
          "rl_answer_not_string",
          "rl",
          {"prompt": "a", "answer": 4},
          r"field 'answer' must be a string",
      ),
      (
          "rl_empty_prompt",
          "rl",
          {"prompt": "  ", "answer": "4"},
          r"field 'prompt' is empty",
      ),
      (
          "rl_prompt_wrong_type",
          "rl",
          {"prompt": 3, "answer": "4"},
          r"field 'prompt' must be a string or a list of messages",
      ),
      (
          "rl_prompt_empty_list",
          "rl",
          {"prompt": [], "answer": "4"},
          r"field 'prompt' must be a string or a list of messages",
      ),
      (
          "rl_prompt_list_of_strings",
          "rl",
          {"prompt": ["add 1+2"], "answer": "3"},
          r"prompt message 0 must be an object",
      ),
      (
          "rl_prompt_message_bad_role",
          "rl",
          {
              "prompt": [
                  {"role": "user", "content": "a"},
                  {"role": "tool", "content": "b"},
              ],
              "answer": "3",
          },
          r"prompt message 1 must be an object with a 'role'",
      ),
      (
          "rl_prompt_message_content_not_string",
          "rl",
          {"prompt": [{"role": "user", "content": 1}], "answer": "3"},
          r"prompt message 0 must be an object .* string 'content'",
      ),
  )
  def test_bad_line_raises_naming_file_and_line(self, kind, bad, regex):
    good = _GOOD_SFT if kind == "sft" else _GOOD_RL
    path = self._write(self._lines(good, bad, good))
    with self.assertRaisesRegex(ValueError, re.escape(f"{path}:2: ") + regex):
      jsonl.read_jsonl(path, kind=kind)

  @parameterized.parameters("", "\n", "  \n\n\t\n")
  def test_empty_file_raises(self, text):
    path = self._write(text)
    with self.assertRaisesRegex(
        ValueError, re.escape(f"{path}: the dataset has no records")
    ):
      jsonl.read_jsonl(path)

  def test_missing_file_raises(self):
    path = os.path.join(self.create_tempdir().full_path, "missing.jsonl")
    with self.assertRaisesRegex(
        ValueError, re.escape(f"dataset file not found: {path!r}")
    ):
      jsonl.read_jsonl(path)

  def test_directory_is_not_a_file(self):
    path = self.create_tempdir().full_path
    with self.assertRaisesRegex(
        ValueError, re.escape(f"dataset file {path!r} is a directory")
    ):
      jsonl.read_jsonl(path)

  @parameterized.named_parameters(
      ("latin1", "caf\xe9".encode("latin-1"), 0xE9, 4),
      ("binary", b"\x89PNG\r\n\x1a\n\x00\xff", 0x89, 1),
  )
  def test_bytes_that_are_not_utf8_name_the_file_and_line(
      self, line, byte, column
  ):
    path = self._write("")
    with open(path, "wb") as f:
      f.write(_GOOD_SFT.encode() + b"\n" + line + b"\n")
    with self.assertRaisesRegex(
        ValueError,
        re.escape(f"{path}:2: not UTF-8 text (byte {byte:#04x} at column")
        + f" {column}\\)",
    ):
      jsonl.read_jsonl(path)

  def test_unknown_kind_raises(self):
    path = self._write(_GOOD_SFT + "\n")
    with self.assertRaisesRegex(
        ValueError, "kind must be 'sft', 'rl' or 'held_out'"
    ):
      jsonl.read_jsonl(path, kind="dpo")

  def test_held_out_kind_reads_either_form_record_by_record(self):
    path = self._write(
        json.dumps({"prompt": "sort 31", "answer": "13"})
        + "\n"
        + json.dumps({"prompt": "reverse 12", "completion": "21"})
        + "\n"
    )
    records = jsonl.read_jsonl(path, kind="held_out")
    self.assertEqual(
        records,
        [
            {
                "messages": [
                    {"role": "user", "content": "sort 31"},
                    {"role": "assistant", "content": "13"},
                ]
            },
            {
                "messages": [
                    {"role": "user", "content": "reverse 12"},
                    {"role": "assistant", "content": "21"},
                ]
            },
        ],
    )


if __name__ == "__main__":
  absltest.main()
