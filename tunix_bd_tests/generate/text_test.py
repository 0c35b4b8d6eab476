# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.generate.text`: strings to completions on a tiny Qwen3."""

from absl.testing import absltest
import numpy as np

from tunix_bd.core import bd_config
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.generate import text
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_BD = bd_config.BlockDiffusionConfig(
    block_size=4,
    mask_token_id=_TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN),
)
_MODEL = test_common.tiny_qwen3(vocab_size=len(_TOKENIZER))
_USER = [{"role": "user", "content": "sort 31"}]


class PromptIdsTest(absltest.TestCase):

  def test_every_prompt_form_gives_the_same_ids(self):
    want = list(chat.encode_prompt(_TOKENIZER, _USER))
    encoding = _TOKENIZER.apply_chat_template(_USER, add_generation_prompt=True)
    rendered = _TOKENIZER.apply_chat_template(
        _USER, add_generation_prompt=True, tokenize=False
    )
    forms = {
        "user turn": ("sort 31", True),
        "conversation": (_USER, True),
        "BatchEncoding": (encoding, True),
        "input_ids": (encoding["input_ids"], True),
        "NumPy ids": (np.asarray(want), True),
        "[1, length] ids": ([want], True),
        "rendered string": (rendered, False),
    }
    for name, (prompt, chat_template) in forms.items():
      with self.subTest(name):
        self.assertEqual(
            text.prompt_ids(_TOKENIZER, prompt, chat_template=chat_template),
            want,
        )

  def test_chat_prompts_pass_the_thinking_switch(self):
    # A template that shows the switch, as Qwen3's generation prompt does.
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.chat_template = (
        tokenizer_lib.CHAT_TEMPLATE
        + "{% if enable_thinking is defined and not enable_thinking %}"
        "{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    )
    off = chat.ChatOptions(enable_thinking=False)
    want = list(chat.encode_prompt(tokenizer, _USER, off))
    self.assertEndsWith(tokenizer.decode(want), "</think>\n\n")
    for prompt in ("sort 31", _USER):
      self.assertEqual(
          text.prompt_ids(tokenizer, prompt, chat_template=True, options=off),
          want,
      )
    generator = text.TextGenerator(
        _MODEL, tokenizer, bd=_BD, max_new_tokens=4, enable_thinking=False
    )
    self.assertEqual(generator.options, off)
    with self.assertRaisesRegex(ValueError, "enable_thinking"):
      text.TextGenerator(_MODEL, tokenizer, bd=_BD, enable_thinking="no")

  def test_raw_text_is_not_chat_rendered(self):
    self.assertEqual(
        text.prompt_ids(_TOKENIZER, "sort 31", chat_template=False),
        _TOKENIZER.encode("sort 31", add_special_tokens=False),
    )

  def test_other_forms_fail(self):
    for prompt in ({"ids": [1]}, [1.5, 2.0], [None]):
      with self.assertRaises(ValueError):
        text.prompt_ids(_TOKENIZER, prompt, chat_template=True)


class TextGeneratorTest(absltest.TestCase):

  def test_completions_equal_the_token_level_denoiser(self):
    generator = text.TextGenerator(
        _MODEL, _TOKENIZER, bd=_BD, max_new_tokens=8, threshold=0.5
    )
    prompts = ["sort 31", [{"role": "user", "content": "reverse 123"}]]
    texts, out = generator.generate(prompts)
    ids = [text.prompt_ids(_TOKENIZER, p, chat_template=True) for p in prompts]
    # Prompts are bucketed to 32 tokens: the same layout, the same tokens.
    reference = denoise.Denoiser(
        _MODEL,
        bd=_BD,
        config=denoise.DenoiseConfig(
            max_new_tokens=8,
            max_prompt_length=32,
            threshold=0.5,
            stop_ids=(_TOKENIZER.eos_token_id,),
            pad_id=_TOKENIZER.pad_token_id,
        ),
    )(ids)
    np.testing.assert_array_equal(
        out.completion_tokens, reference.completion_tokens
    )
    self.assertEqual(
        texts, [_TOKENIZER.decode(c.tolist()) for c in reference.completions]
    )
    self.assertEqual(generator(prompts), texts)

  def test_bad_settings_fail_before_any_compute(self):
    with self.assertRaisesRegex(ValueError, "threshold"):
      text.TextGenerator(_MODEL, _TOKENIZER, bd=_BD, threshold=2.0)
    generator = text.TextGenerator(_MODEL, _TOKENIZER, bd=_BD)
    with self.assertRaisesRegex(ValueError, "list of prompts"):
      generator("sort 31")


if __name__ == "__main__":
  absltest.main()
