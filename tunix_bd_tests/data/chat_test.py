# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.chat: conversations to prompt/completion ids."""

import os

import types

from absl.testing import absltest
from absl.testing import parameterized
import tokenizers
import transformers
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


_TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
# Qwen3's own chat template on a small byte-level tokenizer.
_QWEN3 = os.path.join(_TESTDATA, "qwen3_chat")
_EMPTY_THINK = "<think>\n\n</think>\n\n"


def _render(
    tokenizer, messages, add_generation_prompt=False, **template_kwargs
) -> list[int]:
  ids = tokenizer.apply_chat_template(
      messages,
      tokenize=True,
      add_generation_prompt=add_generation_prompt,
      **template_kwargs,
  )
  if hasattr(ids, "keys"):  # A BatchEncoding in transformers >= 5.
    ids = ids["input_ids"]
  return list(ids)


def _llama3_tokenizer():
  """The embedded tokenizer with Llama 3's turn tokens and chat template."""
  tokenizer = tokenizer_lib.build_char_tokenizer()
  tokenizer.add_special_tokens({
      "eos_token": "<|eot_id|>",
      "extra_special_tokens": [
          "<|begin_of_text|>",
          "<|start_header_id|>",
          "<|end_header_id|>",
      ],
  })
  return tokenizer_lib.override_chat_template(
      tokenizer, os.path.join(_TESTDATA, "llama3_chat.jinja")
  )


def _with_template(template: str):
  tokenizer = tokenizer_lib.build_char_tokenizer()
  tokenizer.chat_template = template
  return tokenizer


# (tokenizer, enable_thinking, what the completion renders before the
# content): the templates a supervised span must be found in.
_TEMPLATES = {
    "chatml": (tokenizer_lib.build_char_tokenizer, None, ""),
    "qwen3": (
        lambda: tokenizer_lib.load_tokenizer(_QWEN3),
        None,
        _EMPTY_THINK,
    ),
    "qwen3_thinking": (
        lambda: tokenizer_lib.load_tokenizer(_QWEN3),
        True,
        _EMPTY_THINK,
    ),
    "qwen3_no_thinking": (
        lambda: tokenizer_lib.load_tokenizer(_QWEN3),
        False,
        "",
    ),
    "llama3": (_llama3_tokenizer, None, ""),
}


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
    prompt_ids, completion_ids = chat.encode_conversation(tokenizer, messages)
    full = _render(tokenizer, messages)
    ids = list(prompt_ids + completion_ids)
    self.assertEqual(full[: len(ids)], ids)
    # ChatML only appends the newline that closes the final turn.
    self.assertEqual(
        full[len(ids) :], tokenizer.encode("\n", add_special_tokens=False)
    )
    self.assertEqual(
        list(prompt_ids),
        _render(tokenizer, messages[:-1], add_generation_prompt=True),
    )
    self.assertEqual(prompt_ids, chat.encode_prompt(tokenizer, messages[:-1]))
    self.assertTrue(all(isinstance(i, int) for i in ids))

  def test_completion_is_answer_then_eos(self):
    prompt_ids, completion_ids = chat.encode_conversation(
        self.tokenizer, _SINGLE
    )
    eos = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
    self.assertEqual(completion_ids[-1], eos)
    self.assertEqual(
        completion_ids,
        tuple(self.tokenizer.encode("123", add_special_tokens=False)) + (eos,),
    )
    self.assertEqual(
        self._text(prompt_ids),
        "<|im_start|>user\nsort 312<|im_end|>\n<|im_start|>assistant\n",
    )

  def test_multi_turn_supervises_only_the_final_assistant_turn(self):
    prompt_ids, completion_ids = chat.encode_conversation(
        self.tokenizer, _MULTI
    )
    self.assertEqual(self._text(completion_ids), "9<|im_end|>")
    self.assertEqual(
        self._text(prompt_ids),
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
    prompt_ids, completion_ids = chat.encode_conversation(
        self.tokenizer, messages
    )
    self.assertEqual(self._text(completion_ids), " a\nb <|im_end|>")

  def test_prompt_is_the_generation_prompt(self):
    ids = chat.encode_prompt(self.tokenizer, _MULTI[:-1])
    self.assertIsInstance(ids, tuple)
    self.assertEqual(
        self._text(ids),
        self.tokenizer.apply_chat_template(
            _MULTI[:-1], tokenize=False, add_generation_prompt=True
        ),
    )

  @parameterized.product(template=tuple(_TEMPLATES), messages=(_SINGLE, _MULTI))
  def test_trained_prompt_is_the_generation_prompt(self, template, messages):
    make, enable_thinking, preamble = _TEMPLATES[template]
    tokenizer = make()
    options = chat.ChatOptions(enable_thinking=enable_thinking)
    kwargs = options.template_kwargs()
    prompt_ids, completion_ids = chat.encode_conversation(
        tokenizer, messages, options=options
    )
    # The very ids generation, OPD and GRPO render, with the same switch.
    prompt = chat.encode_prompt(tokenizer, messages[:-1], options)
    self.assertEqual(prompt_ids, prompt)
    self.assertEqual(
        list(prompt_ids),
        _render(tokenizer, messages[:-1], True, **kwargs),
    )
    # The completion is what the template renders after that prompt, up to
    # and including the EOS that closes the content.
    eos = tokenizer.eos_token
    self.assertEqual(completion_ids[-1], tokenizer.eos_token_id)
    self.assertEqual(
        tokenizer.decode(list(completion_ids)),
        preamble + messages[-1]["content"] + eos,
    )
    full = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    ids = list(prompt_ids + completion_ids)
    self.assertEqual(full[: full.rindex(eos) + len(eos)], tokenizer.decode(ids))

  def test_qwen3_template_encodes(self):
    # Its final turn renders an empty think block its generation prompt
    # lacks, which a prefix rule refused.
    tokenizer = tokenizer_lib.load_tokenizer(_QWEN3)
    prompt_ids, completion_ids = chat.encode_conversation(tokenizer, _SINGLE)
    self.assertEqual(
        tokenizer.decode(list(completion_ids)),
        _EMPTY_THINK + "123<|im_end|>",
    )

  def test_qwen3_thinking_switch_moves_the_empty_think_block(self):
    tokenizer = tokenizer_lib.load_tokenizer(_QWEN3)
    off_prompt_ids, off_completion_ids = chat.encode_conversation(
        tokenizer, _MULTI, options=chat.ChatOptions(enable_thinking=False)
    )
    on_prompt_ids, on_completion_ids = chat.encode_conversation(
        tokenizer, _MULTI
    )
    # Thinking off: the block is the generation prompt's, and the model
    # learns the answer alone; on: it learns to open with the empty block.
    header = "<|im_start|>assistant\n"
    off_prompt = tokenizer.decode(list(off_prompt_ids))
    self.assertEndsWith(off_prompt, header + _EMPTY_THINK)
    self.assertEqual(tokenizer.decode(list(off_completion_ids)), "9<|im_end|>")
    on_prompt = tokenizer.decode(list(on_prompt_ids))
    self.assertEqual(on_prompt + _EMPTY_THINK, off_prompt)
    self.assertEqual(
        tokenizer.decode(list(on_completion_ids)), _EMPTY_THINK + "9<|im_end|>"
    )

  @parameterized.named_parameters(
      (
          "interleaved",
          # Every character of the final answer is followed by a space.
          (
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{% if loop.last and m['role'] == 'assistant' %}"
              "{% for c in m['content'] %}{{ c }} {% endfor %}"
              "{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
          ),
          r"where\.jsonl:7: the chat template does not render the final "
          r"assistant content verbatim, as one contiguous span",
      ),
      (
          "trimmed",
          (
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
          ),
          r"where\.jsonl:7: the chat template does not render the final "
          r"assistant content verbatim",
      ),
      (
          "prompt_differs",
          # The generation prompt says `model`, the rendered turn `assistant`.
          (
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>model\n{% endif %}"
          ),
          r"where\.jsonl:7: the chat template renders the turns before the "
          r"final assistant turn differently from the generation prompt",
      ),
      (
          "twice",
          (
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if not add_generation_prompt %}"
              "{{ messages[-1]['content'] }}<|im_end|>{% endif %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
          ),
          r"where\.jsonl:7: the chat template renders the final assistant "
          r"content and EOS more than once",
      ),
      (
          "eos_in_preamble",
          (
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
              "{% if loop.last and m['role'] == 'assistant' %}<|im_end|>"
              "{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
          ),
          r"where\.jsonl:7: the chat template renders '<\|im_end\|>' between "
          r"the generation prompt and the assistant content",
      ),
  )
  def test_template_without_one_contiguous_span_is_refused(
      self, template, regex
  ):
    tokenizer = _with_template(template)
    messages = [_SINGLE[0], {"role": "assistant", "content": " 12 "}]
    with self.assertRaisesRegex(ValueError, regex):
      chat.encode_conversation(tokenizer, messages, where="where.jsonl:7")

  @parameterized.parameters(None, True, False)
  def test_options_from_data(self, value):
    self.assertEqual(
        chat.options_from_data(types.SimpleNamespace(enable_thinking=value)),
        chat.ChatOptions(enable_thinking=value),
    )

  @parameterized.parameters("false", 0, 1.0)
  def test_options_from_data_rejects_non_bool(self, value):
    with self.assertRaisesRegex(ValueError, r"data\.enable_thinking must be"):
      chat.options_from_data(types.SimpleNamespace(enable_thinking=value))

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
          r"^where: the tokenizer loses the characters 'é' \(it drops them"
          r" or reads them as its unknown token\)",
      ),
  )
  def test_invalid_conversation_raises_naming_where(self, messages, regex):
    with self.assertRaisesRegex(ValueError, regex):
      chat.encode_conversation(self.tokenizer, messages, where="where")

  def test_a_prompt_whose_characters_the_tokenizer_drops_is_refused(self):
    # The embedded vocabulary without an unknown token: BPE drops what it
    # cannot encode.
    backend = tokenizers.Tokenizer(
        tokenizers.models.BPE(vocab=self.tokenizer.get_vocab(), merges=[])
    )
    backend.add_special_tokens(list(self.tokenizer.all_special_tokens))
    dropping = transformers.PreTrainedTokenizerFast(tokenizer_object=backend)
    dropping.chat_template = self.tokenizer.chat_template
    prompt = [{"role": "user", "content": "sort 3€1é"}]
    self.assertNotIn(
        self.tokenizer.unk_token_id,
        dropping.encode("sort 3€1é", add_special_tokens=False),
    )
    for tokenizer in (dropping, self.tokenizer):
      with self.assertRaisesRegex(
          ValueError, r"^p\.jsonl:2: the tokenizer loses the characters 'é€'"
      ):
        chat.encode_prompt(tokenizer, prompt, where="p.jsonl:2")
    self.assertEqual(
        chat.encode_prompt(dropping, [_SINGLE[0]]),
        chat.encode_prompt(self.tokenizer, [_SINGLE[0]]),
    )

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
