# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.tokenizer: the embedded character tokenizer."""

import os
import re

from absl.testing import absltest
from absl.testing import parameterized
import transformers
from tunix_bd.data import tokenizer as tokenizer_lib

_PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n"
_STRINGS = (
    _PRINTABLE,
    "",
    "a",
    "\n",
    "a  b",
    " leading",
    "trailing ",
    "x\n\ny",
    "sort 90210",
    "add 123+4567",
    'What\'s 2 + 2?\nThink {first}; then [answer] ~ `code` | \\ "q"',
) + tuple(_PRINTABLE)
_SPECIAL = (
    tokenizer_lib.PAD_TOKEN,
    tokenizer_lib.EOS_TOKEN,
    tokenizer_lib.IM_START_TOKEN,
    tokenizer_lib.MASK_TOKEN,
    tokenizer_lib.UNK_TOKEN,
)
_CONVERSATION = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "sort 312"},
    {"role": "assistant", "content": "123"},
    {"role": "user", "content": "reverse 12\nplease"},
]
# The exact Qwen/ChatML rendering of `_CONVERSATION`, written out by hand.
_CHATML = (
    "<|im_start|>system\nBe terse.<|im_end|>\n"
    "<|im_start|>user\nsort 312<|im_end|>\n"
    "<|im_start|>assistant\n123<|im_end|>\n"
    "<|im_start|>user\nreverse 12\nplease<|im_end|>\n"
)


def _ids(encoding) -> list[int]:
  # apply_chat_template returns a BatchEncoding in transformers >= 5.
  if hasattr(encoding, "keys"):
    encoding = encoding["input_ids"]
  return list(encoding)


class TokenizerTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.built = tokenizer_lib.build_char_tokenizer()
    self.directory = self.create_tempdir().full_path
    self.built.save_pretrained(self.directory)

  def _tokenizer(self, source: str):
    if source == "built":
      return self.built
    if source == "auto":
      return transformers.AutoTokenizer.from_pretrained(self.directory)
    return tokenizer_lib.load_tokenizer(self.directory)

  @parameterized.parameters("auto", "load_tokenizer")
  def test_saved_and_loaded_tokenizer_gives_identical_ids(self, source):
    loaded = self._tokenizer(source)
    for text in _STRINGS:
      with self.subTest(text=text):
        self.assertEqual(
            loaded.encode(text, add_special_tokens=False),
            self.built.encode(text, add_special_tokens=False),
        )
    self.assertEqual(loaded.get_vocab(), self.built.get_vocab())

  @parameterized.parameters("built", "auto", "load_tokenizer")
  def test_decode_inverts_encode(self, source):
    tokenizer = self._tokenizer(source)
    for text in _STRINGS:
      with self.subTest(text=text):
        ids = tokenizer.encode(text, add_special_tokens=False)
        self.assertEqual(tokenizer.decode(ids), text)

  @parameterized.parameters("built", "load_tokenizer")
  def test_every_character_is_one_distinct_known_id(self, source):
    tokenizer = self._tokenizer(source)
    ids = [tokenizer.encode(c, add_special_tokens=False) for c in _PRINTABLE]
    self.assertTrue(all(len(i) == 1 for i in ids), ids)
    flat = [i[0] for i in ids]
    self.assertLen(set(flat), len(_PRINTABLE))
    self.assertNotIn(tokenizer.unk_token_id, flat)
    self.assertEqual(
        tokenizer.encode(_PRINTABLE, add_special_tokens=False), flat
    )

  @parameterized.parameters("built", "auto", "load_tokenizer")
  def test_special_tokens_are_single_ids(self, source):
    tokenizer = self._tokenizer(source)
    ids = {}
    for token in _SPECIAL:
      with self.subTest(token=token):
        encoded = tokenizer.encode(token, add_special_tokens=False)
        self.assertLen(encoded, 1)
        self.assertEqual(encoded, [tokenizer.convert_tokens_to_ids(token)])
        self.assertEqual(tokenizer.decode(encoded), token)
        ids[token] = encoded[0]
    self.assertLen(set(ids.values()), len(_SPECIAL))
    self.assertEqual(tokenizer.pad_token, tokenizer_lib.PAD_TOKEN)
    self.assertEqual(tokenizer.eos_token, "<|im_end|>")
    self.assertEqual(tokenizer.pad_token_id, ids[tokenizer_lib.PAD_TOKEN])
    self.assertEqual(tokenizer.eos_token_id, ids["<|im_end|>"])
    self.assertEqual(tokenizer.unk_token_id, ids[tokenizer_lib.UNK_TOKEN])
    mask_id = ids["<|mask|>"]
    self.assertNotIn(
        mask_id,
        (tokenizer.pad_token_id, tokenizer.eos_token_id, ids["<|im_start|>"]),
    )
    # Special tokens inside text stay single ids next to characters.
    self.assertEqual(
        tokenizer.encode("a<|mask|>b", add_special_tokens=False),
        tokenizer.encode("a", add_special_tokens=False)
        + [mask_id]
        + tokenizer.encode("b", add_special_tokens=False),
    )

  @parameterized.parameters("built", "auto", "load_tokenizer")
  def test_vocab_size_is_vocab_size(self, source):
    tokenizer = self._tokenizer(source)
    self.assertLen(tokenizer, tokenizer_lib.VOCAB_SIZE)
    self.assertEqual(
        sorted(tokenizer.get_vocab().values()),
        list(range(tokenizer_lib.VOCAB_SIZE)),
    )

  @parameterized.parameters("built", "auto", "load_tokenizer")
  def test_chat_template_renders_exact_chatml(self, source):
    tokenizer = self._tokenizer(source)
    rendered = tokenizer.apply_chat_template(_CONVERSATION, tokenize=False)
    self.assertEqual(rendered, _CHATML)
    with_prompt = tokenizer.apply_chat_template(
        _CONVERSATION, tokenize=False, add_generation_prompt=True
    )
    self.assertEqual(with_prompt, _CHATML + "<|im_start|>assistant\n")
    self.assertEqual(
        _ids(
            tokenizer.apply_chat_template(
                _CONVERSATION, tokenize=True, add_generation_prompt=True
            )
        ),
        tokenizer.encode(
            _CHATML + "<|im_start|>assistant\n", add_special_tokens=False
        ),
    )

  @parameterized.parameters("built", "load_tokenizer")
  def test_unknown_character_maps_to_unk(self, source):
    tokenizer = self._tokenizer(source)
    unk = tokenizer.convert_tokens_to_ids(tokenizer_lib.UNK_TOKEN)
    self.assertEqual(tokenizer.unk_token_id, unk)
    a, b = tokenizer.encode("ab", add_special_tokens=False)
    self.assertEqual(tokenizer.encode("é", add_special_tokens=False), [unk])
    self.assertEqual(
        tokenizer.encode("aé\tb€", add_special_tokens=False),
        [a, unk, unk, b, unk],
    )

  def test_load_tokenizer_rejects_empty_directory_naming_the_key(self):
    empty = self.create_tempdir().full_path
    with self.assertRaises(ValueError) as raised:
      tokenizer_lib.load_tokenizer(empty, key="model.checkpoint")
    message = str(raised.exception)
    self.assertStartsWith(message, f"model.checkpoint={empty!r} has no")
    self.assertIn("has no tokenizer", message)
    self.assertIn("no config.json", message)
    self.assertNotIn("sentencepiece", message)

  def test_load_tokenizer_without_tokenizer_files_keeps_config_quiet(self):
    directory = self.create_tempdir()
    directory.create_file("config.json", "{}")
    with self.assertRaisesRegex(ValueError, r"has no tokenizer \(") as raised:
      tokenizer_lib.load_tokenizer(directory.full_path)
    self.assertNotIn("no config.json", str(raised.exception))

  @parameterized.parameters(
      "config.json", "tokenizer.json", "tokenizer_config.json"
  )
  def test_a_broken_json_file_is_named_with_its_line(self, name):
    path = os.path.join(self.directory, name)
    with open(path, "w") as f:
      f.write('{"a": 1,\n}')
    with self.assertRaisesRegex(
        ValueError,
        rf"^model\.checkpoint=.*: {re.escape(path)} is not valid JSON \(.*"
        r"line 2 column 1",
    ):
      tokenizer_lib.load_tokenizer(self.directory, key="model.checkpoint")

  def test_load_tokenizer_rejects_missing_chat_template(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.chat_template = None
    directory = self.create_tempdir().full_path
    tokenizer.save_pretrained(directory)
    with self.assertRaisesRegex(ValueError, "has no chat_template"):
      tokenizer_lib.load_tokenizer(directory)

  def test_load_tokenizer_rejects_deleted_chat_template_file(self):
    template = os.path.join(self.directory, "chat_template.jinja")
    self.assertTrue(os.path.exists(template))
    os.remove(template)
    with self.assertRaisesRegex(ValueError, "has no chat_template"):
      tokenizer_lib.load_tokenizer(self.directory)

  def test_load_tokenizer_rejects_missing_pad_token(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.pad_token = None
    directory = self.create_tempdir().full_path
    tokenizer.save_pretrained(directory)
    with self.assertRaisesRegex(ValueError, "has no pad_token_id"):
      tokenizer_lib.load_tokenizer(directory)

  def _template_file(self, text: str) -> str:
    path = os.path.join(self.create_tempdir().full_path, "chat.jinja")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    return path

  def test_chat_template_override_is_rendered_and_exported(self):
    template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
        "<|im_end|>{% endfor %}{% if add_generation_prompt %}assistant: "
        "{% endif %}"
    )
    path = self._template_file(template)
    tokenizer = tokenizer_lib.load_tokenizer(self.directory, path)
    self.assertEqual(tokenizer.chat_template, template)
    self.assertEqual(
        tokenizer.apply_chat_template(
            _CONVERSATION[1:2], tokenize=False, add_generation_prompt=True
        ),
        "user: sort 312<|im_end|>assistant: ",
    )
    # An export saves the tokenizer, so it carries the template trained with.
    exported = self.create_tempdir().full_path
    tokenizer.save_pretrained(exported)
    self.assertEqual(
        tokenizer_lib.load_tokenizer(exported).chat_template, template
    )
    # Without an override the directory's own template is kept.
    self.assertEqual(
        tokenizer_lib.load_tokenizer(self.directory).chat_template,
        tokenizer_lib.CHAT_TEMPLATE,
    )

  def test_chat_template_override_replaces_a_missing_template(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.chat_template = None
    directory = self.create_tempdir().full_path
    tokenizer.save_pretrained(directory)
    path = self._template_file(tokenizer_lib.CHAT_TEMPLATE)
    loaded = tokenizer_lib.load_tokenizer(directory, path)
    self.assertEqual(loaded.chat_template, tokenizer_lib.CHAT_TEMPLATE)

  @parameterized.named_parameters(
      ("missing", "missing", r"data\.chat_template='.*nope\.jinja': no such"),
      ("directory", "directory", r"data\.chat_template='.*': a directory, not"),
      ("empty", " \n", r"data\.chat_template='.*': the file is empty"),
      ("not_utf8", b"\xff\xfe", r"data\.chat_template='.*': cannot read"),
      (
          "bad_jinja",
          "{% for m in messages %}",
          r"data\.chat_template='.*': the template does not render a prompt",
      ),
      ("not_a_path", 3, r"data\.chat_template must be a path"),
  )
  def test_chat_template_override_rejects_bad_file(self, content, regex):
    if content == "missing":
      path = os.path.join(self.create_tempdir().full_path, "nope.jinja")
    elif content == "directory":
      path = self.create_tempdir().full_path
    elif isinstance(content, bytes):
      path = os.path.join(self.create_tempdir().full_path, "chat.jinja")
      with open(path, "wb") as f:
        f.write(content)
    elif isinstance(content, str):
      path = self._template_file(content)
    else:
      path = content
    with self.assertRaisesRegex(ValueError, regex):
      tokenizer_lib.load_tokenizer(self.directory, path)
    with self.assertRaisesRegex(ValueError, regex):
      tokenizer_lib.override_chat_template(
          tokenizer_lib.build_char_tokenizer(), path
      )


if __name__ == "__main__":
  absltest.main()
