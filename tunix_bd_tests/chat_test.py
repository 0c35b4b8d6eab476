# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.chat: conversations to prompt/completion ids."""

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib

_SINGLE = [
    {"role": "user", "content": "sort 312"},
    {"role": "assistant", "content": "123"},
]
_MULTI = [
    {"role": "system", "content": "Answer with digits."},
    {"role": "user", "content": "reverse 12"},
    {"role": "assistant", "content": "21"},
    {"role": "user", "content": "add 4+5"},
    {"role": "assistant", "content": "9"},
]


def _render(tokenizer, messages, add_generation_prompt=False) -> list[int]:
  ids = tokenizer.apply_chat_template(
      messages, tokenize=True, add_generation_prompt=add_generation_prompt
  )
  if hasattr(ids, "keys"):  # A BatchEncoding in transformers >= 5.
    ids = ids["input_ids"]
  return list(ids)


class ChatTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    built = tokenizer_lib.build_char_tokenizer()
    directory = self.create_tempdir().full_path
    built.save_pretrained(directory)
    self.tokenizers = {
        "built": built,
        "loaded": tokenizer_lib.load_tokenizer(directory),
    }
    self.tokenizer = built

  def _text(self, ids) -> str:
    return self.tokenizer.decode(list(ids))

  @parameterized.product(source=("built", "loaded"), messages=(_SINGLE, _MULTI))
  def test_prompt_and_completion_are_a_prefix_of_the_rendering(
      self, source, messages
  ):
    tokenizer = self.tokenizers[source]
    encoded = chat.encode_conversation(tokenizer, messages)
    full = _render(tokenizer, messages)
    ids = list(encoded.prompt_ids + encoded.completion_ids)
    self.assertEqual(full[: len(ids)], ids)
    # ChatML only appends the newline that closes the final turn.
    self.assertEqual(
        full[len(ids) :], tokenizer.encode("\n", add_special_tokens=False)
    )
    self.assertEqual(encoded.length, len(ids))
    self.assertEqual(
        list(encoded.prompt_ids),
        _render(tokenizer, messages[:-1], add_generation_prompt=True),
    )
    self.assertEqual(
        encoded.prompt_ids, chat.encode_prompt(tokenizer, messages[:-1])
    )
    self.assertTrue(all(isinstance(i, int) for i in ids))

  def test_completion_is_answer_then_eos(self):
    encoded = chat.encode_conversation(self.tokenizer, _SINGLE)
    eos = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
    self.assertEqual(encoded.completion_ids[-1], eos)
    self.assertEqual(
        encoded.completion_ids,
        tuple(self.tokenizer.encode("123", add_special_tokens=False)) + (eos,),
    )
    self.assertEqual(
        self._text(encoded.prompt_ids),
        "<|im_start|>user\nsort 312<|im_end|>\n<|im_start|>assistant\n",
    )

  def test_multi_turn_supervises_only_the_final_assistant_turn(self):
    encoded = chat.encode_conversation(self.tokenizer, _MULTI)
    self.assertEqual(self._text(encoded.completion_ids), "9<|im_end|>")
    self.assertEqual(
        self._text(encoded.prompt_ids),
        "<|im_start|>system\nAnswer with digits.<|im_end|>\n"
        "<|im_start|>user\nreverse 12<|im_end|>\n"
        "<|im_start|>assistant\n21<|im_end|>\n"
        "<|im_start|>user\nadd 4+5<|im_end|>\n"
        "<|im_start|>assistant\n",
    )

  def test_answer_whitespace_and_newlines_are_kept(self):
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": " a\nb "},
    ]
    encoded = chat.encode_conversation(self.tokenizer, messages)
    self.assertEqual(self._text(encoded.completion_ids), " a\nb <|im_end|>")

  def test_prompt_is_the_generation_prompt(self):
    ids = chat.encode_prompt(self.tokenizer, _MULTI[:-1])
    self.assertIsInstance(ids, tuple)
    self.assertEqual(
        self._text(ids),
        self.tokenizer.apply_chat_template(
            _MULTI[:-1], tokenize=False, add_generation_prompt=True
        ),
    )

  @parameterized.named_parameters(
      ("empty", [], r"where: 'messages' must be a non-empty list"),
      ("not_a_list", "hi", r"where: 'messages' must be a non-empty list"),
      (
          "user_last",
          [_SINGLE[0], _SINGLE[1], {"role": "user", "content": "more"}],
          r"where: the conversation has no final assistant turn",
      ),
      (
          "empty_assistant",
          [_SINGLE[0], {"role": "assistant", "content": " \n"}],
          r"where: the final assistant turn is empty",
      ),
      (
          "bad_role",
          [{"role": "tool", "content": "x"}, _SINGLE[1]],
          r"where: message 0 has role 'tool'",
      ),
      (
          "missing_role",
          [{"content": "x"}, _SINGLE[1]],
          r"where: message 0 has role None",
      ),
      (
          "non_string_content",
          [_SINGLE[0], {"role": "assistant", "content": 123}],
          r"where: message 1 has no string 'content'",
      ),
      (
          "not_an_object",
          [_SINGLE[0], ["assistant", "x"]],
          r"where: message 1 is not an object",
      ),
      (
          "assistant_only",
          [_SINGLE[1]],
          r"where: the assistant turn has no prompt before it",
      ),
      (
          "unknown_characters_in_answer",
          [_SINGLE[0], {"role": "assistant", "content": "12é"}],
          r"where: the assistant turn contains special tokens "
          r"\['<\|unk\|>'\]",
      ),
      (
          "control_token_in_answer",
          [_SINGLE[0], {"role": "assistant", "content": "1<|mask|>2"}],
          r"where: the assistant turn contains special tokens "
          r"\['<\|mask\|>'\]",
      ),
      (
          "eos_in_answer",
          [_SINGLE[0], {"role": "assistant", "content": "1<|im_end|>"}],
          r"where: the assistant turn contains special tokens "
          r"\['<\|im_end\|>'\]",
      ),
      (
          "unknown_characters_in_prompt",
          [{"role": "user", "content": "sort é"}, _SINGLE[1]],
          r"where: the prompt has characters the tokenizer maps to "
          r"'<\|unk\|>'",
      ),
  )
  def test_invalid_conversation_raises_naming_where(self, messages, regex):
    with self.assertRaisesRegex(ValueError, regex):
      chat.encode_conversation(self.tokenizer, messages, where="where")

  def test_non_chatml_template_is_rejected(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ 'assistant: ' }}"
        "{% endif %}"
    )
    with self.assertRaisesRegex(
        ValueError, r"data\.jsonl:3: the chat template does not render"
    ):
      chat.encode_conversation(tokenizer, _SINGLE, where="data.jsonl:3")


if __name__ == "__main__":
  absltest.main()
