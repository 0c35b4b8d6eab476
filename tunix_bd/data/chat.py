# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Conversations to (prompt, completion) token ids through a chat template.

AR pretraining, diffusion SFT, generation and evaluation share these rules:
docs/design.md "Chat rendering".
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import transformers

Messages = Sequence[Mapping[str, str]]


@dataclasses.dataclass(frozen=True)
class ChatOptions:
  """Switches passed to the chat template on every render:
  `enable_thinking`, Qwen3's (None passes nothing: the template's default).
  """

  enable_thinking: bool | None = None

  def __post_init__(self):
    value = self.enable_thinking
    if value is not None and not isinstance(value, bool):
      raise ValueError(
          "enable_thinking must be True, False or None (the template's "
          f"default), got {value!r}."
      )

  def template_kwargs(self) -> dict[str, Any]:
    """Keyword arguments for `apply_chat_template`."""
    if self.enable_thinking is None:
      return {}
    return {"enable_thinking": self.enable_thinking}

  def to_dict(self) -> dict[str, Any]:
    """The switches, as an export records them (`SETTINGS_KEY`)."""
    return dataclasses.asdict(self)


# The entry of an export's `block_diffusion.json` that records the switches
# the model was trained with.
SETTINGS_KEY = "chat"


def options_from_data(data: Any) -> ChatOptions:
  """The `ChatOptions` of a recipe's `data` section (its `enable_thinking`,
  None where it has none), checked, errors naming `data.enable_thinking`."""
  try:
    return ChatOptions(enable_thinking=getattr(data, "enable_thinking", None))
  except ValueError as e:
    raise ValueError(f"data.{e}") from None


def trained_options(
    recorded: Mapping[str, Any] | None, requested: ChatOptions
) -> ChatOptions:
  """The switches to render with: those `recorded` (the export's
  `SETTINGS_KEY` entry, or None) where `requested`'s are None; a ValueError
  where `requested` sets another value."""
  trained = ChatOptions(**(recorded or {}))
  if requested.enable_thinking is None:
    return trained
  if trained.enable_thinking not in (None, requested.enable_thinking):
    raise ValueError(
        f"data.enable_thinking={requested.enable_thinking!r} disagrees with"
        " the checkpoint, which was trained with enable_thinking="
        f"{trained.enable_thinking!r}; leave it unset to render prompts as"
        " in training."
    )
  return requested


def validate_messages(messages: Messages, where: str = "conversation") -> None:
  """Checks the shape of a conversation, naming `where` in errors."""
  if not isinstance(messages, (list, tuple)) or not messages:
    raise ValueError(f"{where}: 'messages' must be a non-empty list.")
  for i, message in enumerate(messages):
    if not isinstance(message, Mapping):
      raise ValueError(f"{where}: message {i} is not an object.")
    role, content = message.get("role"), message.get("content")
    if role not in ("system", "user", "assistant"):
      raise ValueError(
          f"{where}: message {i} has role {role!r}; expected 'system', "
          "'user' or 'assistant'."
      )
    if not isinstance(content, str):
      raise ValueError(f"{where}: message {i} has no string 'content'.")
  if messages[-1]["role"] != "assistant":
    raise ValueError(
        f"{where}: the conversation has no final assistant turn to supervise."
    )
  if not messages[-1]["content"].strip():
    raise ValueError(f"{where}: the final assistant turn is empty.")
  if len(messages) < 2:
    raise ValueError(f"{where}: the assistant turn has no prompt before it.")


def render(
    tokenizer: transformers.PreTrainedTokenizerBase,
    messages: Messages,
    options: ChatOptions,
    *,
    add_generation_prompt: bool = True,
    tokenize: bool = False,
) -> str | tuple[int, ...]:
  """Renders `messages` with the chat template and `options`' switches: the
  text, or its token ids if `tokenize`; by default a generation prompt."""
  out = tokenizer.apply_chat_template(
      list(messages),
      add_generation_prompt=add_generation_prompt,
      tokenize=tokenize,
      **options.template_kwargs(),
  )
  if not tokenize:
    return out
  if isinstance(out, Mapping):  # transformers >= 5 returns a BatchEncoding.
    out = out["input_ids"]
  return tuple(int(i) for i in out)


def prompt_text(
    tokenizer: transformers.PreTrainedTokenizerBase,
    messages: Messages,
    options: ChatOptions = ChatOptions(),
) -> str:
  """Renders `messages` (without the answer) as generation prompt text."""
  return render(tokenizer, messages, options)


def encode_prompt(
    tokenizer: transformers.PreTrainedTokenizerBase,
    messages: Messages,
    options: ChatOptions = ChatOptions(),
    where: str = "a prompt",
) -> tuple[int, ...]:
  """Renders `messages` (without the answer) as generation prompt ids.

  Fails closed, naming `where`, on characters the tokenizer loses (drops,
  or reads as its unknown token): those its ids do not decode back to.
  """
  ids = render(tokenizer, messages, options, tokenize=True)
  text = prompt_text(tokenizer, messages, options)
  backend = getattr(tokenizer, "backend_tokenizer", None)  # A fast one's.
  normalizer = getattr(backend, "normalizer", None)
  if normalizer is not None:  # What the tokenizer means to keep (e.g. NFC).
    text = normalizer.normalize_str(text)
  decoded = tokenizer.decode(ids, clean_up_tokenization_spaces=False)
  lost = "".join(sorted(set(text) - set(decoded)))
  if lost:
    raise ValueError(
        f"{where}: the tokenizer loses the characters {lost!r} (it drops"
        " them or reads them as its unknown token); remove them from the"
        " prompt."
    )
  return ids


def _encode_text(tokenizer, text: str) -> tuple[int, ...]:
  if not text:
    return ()
  return tuple(tokenizer.encode(text, add_special_tokens=False))


def encode_conversation(
    tokenizer: transformers.PreTrainedTokenizerBase,
    messages: Messages,
    where: str = "conversation",
    options: ChatOptions = ChatOptions(),
) -> tuple[tuple[int, ...], tuple[int, ...]]:
  """`(prompt_ids, completion_ids)` of a conversation whose final assistant
  turn is the completion; `where` names it in errors (`file.jsonl:12`).

  The prompt ids are `encode_prompt(messages[:-1])`. The full rendering
  must continue the prompt's text with a preamble (maybe empty), the
  content verbatim and EOS; each is tokenized on its own, never merged
  across the prompt/completion boundary as tokenizing the whole rendering
  might (ids generation never produces after the prompt's own). What the
  template appends after EOS (Qwen's newline) is not supervised.
  """
  validate_messages(messages, where)
  prompt_ids = encode_prompt(tokenizer, messages[:-1], options, where)
  answer = messages[-1]["content"]
  answer_ids = _encode_text(tokenizer, answer)
  # Special ids inside the answer (a literal `<|im_end|>` or `<|mask|>`, or
  # characters mapped to unk) would be supervised as ordinary tokens.
  special = set(tokenizer.all_special_ids)
  bad = sorted(
      {tokenizer.convert_ids_to_tokens(i) for i in answer_ids if i in special}
  )
  if bad:
    raise ValueError(
        f"{where}: the assistant turn contains special tokens {bad} (an "
        "unknown character becomes the unk token); remove them."
    )
  prompt = prompt_text(tokenizer, messages[:-1], options)
  full = render(tokenizer, messages, options, add_generation_prompt=False)
  if not full.startswith(prompt):
    raise ValueError(
        f"{where}: the chat template renders the turns before the final "
        "assistant turn differently from the generation prompt, so the model "
        "would be trained on a prompt generation never shows it; use a "
        "template (data.chat_template) whose full rendering starts with its "
        "generation prompt."
    )
  rest = full[len(prompt) :]
  closed = answer + tokenizer.eos_token
  start = rest.find(closed)
  if start < 0:
    raise ValueError(
        f"{where}: the chat template does not render the final assistant "
        "content verbatim, as one contiguous span closed by the EOS token "
        f"{tokenizer.eos_token!r}, after the generation prompt; tunix_bd "
        "supervises exactly that span (set data.chat_template to a template "
        "that renders it)."
    )
  if rest.find(closed, start + 1) >= 0:
    raise ValueError(
        f"{where}: the chat template renders the final assistant content "
        "and EOS more than once after the generation prompt, so the "
        "supervised span is ambiguous."
    )
  preamble_ids = _encode_text(tokenizer, rest[:start])
  # The template's own text before the content (Qwen3's empty think block)
  # is generated too: an EOS or unk id there would stop or garble it.
  eos = tokenizer.eos_token_id
  unk = tokenizer.unk_token_id
  if eos in preamble_ids or (unk is not None and unk in preamble_ids):
    raise ValueError(
        f"{where}: the chat template renders {rest[:start]!r} between the "
        "generation prompt and the assistant content, which encodes to the "
        "EOS or unk token."
    )
  return prompt_ids, preamble_ids + answer_ids + (eos,)
