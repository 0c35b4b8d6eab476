# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Conversations to (prompt, completion) token ids through a chat template.

The supervised span is the final assistant turn only: every earlier turn is
prompt context. This one rule keeps every supervised token from seeing a
later turn, also inside a bidirectional block, and it is shared by AR
pretraining, diffusion SFT, generation and evaluation.

The completion is the assistant content followed by the tokenizer's EOS
(`<|im_end|>` for Qwen), so a model learns to stop. What the chat template
appends after EOS (Qwen adds a newline) is not part of the completion.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import transformers

Messages = Sequence[Mapping[str, str]]


@dataclasses.dataclass(frozen=True)
class EncodedConversation:
  """Token ids of one conversation.

  Attributes:
    prompt_ids: the rendered context up to and including the assistant
      header of the final turn.
    completion_ids: the final assistant content followed by EOS.
  """

  prompt_ids: tuple[int, ...]
  completion_ids: tuple[int, ...]

  @property
  def length(self) -> int:
    return len(self.prompt_ids) + len(self.completion_ids)


def validate_messages(messages: Messages, where: str = "conversation") -> None:
  """Checks the shape of a conversation, naming `where` in errors.

  Raises:
    ValueError: if the conversation is empty, a message is malformed, or the
      last message is not a non-empty assistant turn.
  """
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


def encode_prompt(
    tokenizer: transformers.PreTrainedTokenizerBase, messages: Messages
) -> tuple[int, ...]:
  """Renders `messages` (without the answer) as a generation prompt."""
  ids = tokenizer.apply_chat_template(
      list(messages), add_generation_prompt=True, tokenize=True
  )
  if isinstance(ids, Mapping):  # transformers >= 5 returns a BatchEncoding.
    ids = ids["input_ids"]
  return tuple(int(i) for i in ids)


def encode_conversation(
    tokenizer: transformers.PreTrainedTokenizerBase,
    messages: Messages,
    where: str = "conversation",
) -> EncodedConversation:
  """Encodes a conversation whose final assistant turn is the completion.

  Args:
    tokenizer: a chat tokenizer with an EOS token.
    messages: `[{"role": ..., "content": ...}, ...]` ending with assistant.
    where: how errors name this conversation (e.g. `file.jsonl:12`).

  Returns:
    The prompt and completion ids.

  Raises:
    ValueError: on a malformed conversation, a completion that contains
      characters the tokenizer cannot represent, or a chat template whose
      prompt is not a prefix of the full rendering.
  """
  validate_messages(messages, where)
  prompt_ids = encode_prompt(tokenizer, messages[:-1])
  answer = messages[-1]["content"]
  answer_ids = tokenizer.encode(answer, add_special_tokens=False)
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
  unk = tokenizer.unk_token_id
  if unk is not None and unk in prompt_ids:
    raise ValueError(
        f"{where}: the prompt has characters the tokenizer maps to "
        f"{tokenizer.unk_token!r}."
    )
  completion_ids = tuple(answer_ids) + (tokenizer.eos_token_id,)
  # Tokenizing the pieces separately must agree with the full rendering,
  # otherwise prompt/completion boundaries would be wrong.
  full = tokenizer.apply_chat_template(list(messages), tokenize=True)
  if isinstance(full, Mapping):
    full = full["input_ids"]
  expected = prompt_ids + completion_ids
  if tuple(full[: len(expected)]) != expected:
    raise ValueError(
        f"{where}: the chat template does not render the prompt as a prefix "
        "of the full conversation followed by the answer and EOS; tunix_bd "
        "needs a template of that (Qwen/ChatML) form."
    )
  return EncodedConversation(prompt_ids, completion_ids)
