# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The embedded character-level tokenizer, built in code.

A real Hugging Face fast tokenizer with a Qwen-style chat template, so the
embedded default takes a user's Qwen3 tokenizer's code path
(`save_pretrained`, `AutoTokenizer.from_pretrained`). Special tokens follow
Qwen (`<|endoftext|>` pads, `<|im_end|>` ends a turn and chat generation);
`<|mask|>` is the mask token; `<|reserved_k|>` ids pad to `VOCAB_SIZE`.
"""

from __future__ import annotations

import json
import os
import string

import tokenizers
from tokenizers import decoders
from tokenizers import models
import transformers

PAD_TOKEN = "<|endoftext|>"
IM_START_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
MASK_TOKEN = "<|mask|>"
UNK_TOKEN = "<|unk|>"
_SPECIAL_TOKENS = (PAD_TOKEN, IM_START_TOKEN, EOS_TOKEN, MASK_TOKEN, UNK_TOKEN)
# Printable ASCII without the vertical whitespace that `string.printable`
# adds, plus the newline the chat template needs.
_CHARACTERS = (*sorted(set(string.printable) - set("\t\r\x0b\x0c\n")), "\n")
VOCAB_SIZE = 128
# A directory holding none of these has no tokenizer: Hugging Face's fast
# (`tokenizer.json`) and slow files, and the config naming its class.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
)

# Qwen's template without tools or thinking blocks: every message is
# `<|im_start|>{role}\n{content}<|im_end|>\n`.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_char_tokenizer() -> transformers.PreTrainedTokenizerFast:
  """The embedded character-level chat tokenizer: the special tokens, one
  id per printable ASCII character, then reserved ids up to `VOCAB_SIZE`."""
  vocab_tokens = list(_SPECIAL_TOKENS) + list(_CHARACTERS)
  num_reserved = VOCAB_SIZE - len(vocab_tokens)
  vocab_tokens += [f"<|reserved_{i}|>" for i in range(num_reserved)]
  vocab = {token: i for i, token in enumerate(vocab_tokens)}
  # BPE without merges splits text into single characters, and an unknown
  # character becomes `<|unk|>` instead of silently vanishing.
  backend = tokenizers.Tokenizer(
      models.BPE(vocab=vocab, merges=[], unk_token=UNK_TOKEN)
  )
  backend.decoder = decoders.Fuse()
  backend.add_special_tokens([t for t in vocab_tokens if t.startswith("<|")])
  tokenizer = transformers.PreTrainedTokenizerFast(
      tokenizer_object=backend,
      pad_token=PAD_TOKEN,
      eos_token=EOS_TOKEN,
      unk_token=UNK_TOKEN,
      additional_special_tokens=[IM_START_TOKEN, MASK_TOKEN],
      model_max_length=4096,
      padding_side="right",
  )
  tokenizer.chat_template = CHAT_TEMPLATE
  return tokenizer


def override_chat_template(
    tokenizer: transformers.PreTrainedTokenizerBase,
    path: str,
    key: str = "data.chat_template",
) -> transformers.PreTrainedTokenizerBase:
  """`tokenizer` with its chat template replaced, in place, by the file
  `path` ("" keeps its own), so every render, the fingerprint and the
  export carry it; a ValueError naming `key` unless the file is a UTF-8
  template that renders a one-turn generation prompt."""
  if not isinstance(path, str):
    raise ValueError(f"{key} must be a path (a string), got {path!r}.")
  if not path:
    return tokenizer
  if not os.path.isfile(path):
    what = "a directory, not a file" if os.path.isdir(path) else "no such file"
    raise ValueError(f"{key}={path!r}: {what}.")
  try:
    with open(path, encoding="utf-8") as f:
      text = f.read()
  except (OSError, UnicodeDecodeError) as e:
    raise ValueError(f"{key}={path!r}: cannot read the file ({e}).") from e
  if not text.strip():
    raise ValueError(f"{key}={path!r}: the file is empty.")
  try:
    tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}],
        chat_template=text,
        add_generation_prompt=True,
        tokenize=False,
    )
  except Exception as e:  # Jinja raises many kinds; any is a bad template.
    raise ValueError(
        f"{key}={path!r}: the template does not render a prompt "
        f"({type(e).__name__}: {e})."
    ) from e
  tokenizer.chat_template = text
  return tokenizer


def _broken_json(directory: str) -> str | None:
  """The first JSON file of `directory` that does not parse, and where (the
  errors transformers raises for them name no file)."""
  for name in sorted(os.listdir(directory)):
    path = os.path.join(directory, name)
    if not name.endswith(".json") or not os.path.isfile(path):
      continue
    try:
      with open(path, encoding="utf-8") as f:
        json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      return f"{path} is not valid JSON ({e}); copy or download it again."
  return None


def load_tokenizer(
    directory: str, chat_template: str = "", *, key: str | None = None
) -> transformers.PreTrainedTokenizerBase:
  """Loads a tokenizer directory, its template replaced by `chat_template`
  ("" keeps it); a ValueError naming `key` (`model.checkpoint`) if it does
  not load or lacks a pad, an EOS or a chat template."""
  named = f"{key}={directory!r}" if key else repr(directory)
  if not any(
      os.path.isfile(os.path.join(directory, name)) for name in _TOKENIZER_FILES
  ):
    # Checked here: transformers would report a missing sentencepiece.
    config = os.path.isfile(os.path.join(directory, "config.json"))
    raise ValueError(
        f"{named} has no tokenizer (none of {', '.join(_TOKENIZER_FILES)})"
        + ("" if config else " and no config.json")
        + f"; set {key or 'it'} to a Hugging Face model directory with its"
        " tokenizer."
    )
  try:
    # Never the checkpoint's own code: SDAR and Fast-dLLM v2 directories
    # name theirs in `auto_map` (and transformers would prompt for it).
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        directory, trust_remote_code=False
    )
  except (OSError, ValueError) as e:
    why = _broken_json(directory) or f"cannot load its tokenizer: {e}"
    raise ValueError(f"{named}: {why}") from e
  override_chat_template(tokenizer, chat_template)
  for attr in ("eos_token_id", "pad_token_id", "chat_template"):
    if getattr(tokenizer, attr, None) is None:
      raise ValueError(
          f"the tokenizer of {named} has no {attr}; tunix_bd needs a chat"
          " template, an EOS token and a pad token."
      )
  return tokenizer
