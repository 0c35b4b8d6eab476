# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Prompts to decode (OPD rollouts, RL evaluation), checked before compute.

Each conversation's last assistant turn is the span the model re-generates
and the reference answer; earlier turns are its context and later turns are
dropped (the model never sees a future turn). Conversations without an
assistant turn or without a prompt, prompts too long for the rollout, and
stop ids that are the mask or pad id fail here, naming the row.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
from tunix_bd.data import chat


def prompt_messages(
    messages: Sequence[Mapping[str, str]], where: str
) -> tuple[list[Mapping[str, str]], str]:
  """`(prompt turns, reference answer)` of a conversation (see the module
  doc); errors name `where`."""
  roles = [m.get("role") if isinstance(m, Mapping) else None for m in messages]
  if "assistant" not in roles:
    raise ValueError(
        f"{where}: the conversation has no completion span (no assistant turn)."
    )
  last = len(roles) - 1 - roles[::-1].index("assistant")
  kept = list(messages[: last + 1])
  chat.validate_messages(kept, where)  # Empty prompt, malformed turns.
  return kept[:-1], kept[-1]["content"]


def epoch_shuffled_indices(
    num: int, count: int, index: int, *, seed: int, stream: int
) -> np.ndarray:
  """int `[count]` indices of batch `index` of a stream that visits all
  `num` items once per epoch, in the order of `permutation(num)` seeded by
  `(seed, epoch, stream)`: a function of its arguments alone, so a resumed
  run reads the same batches."""
  positions = np.arange(index * count, (index + 1) * count)
  out = np.empty(count, np.int64)
  for epoch in np.unique(positions // num):
    order = np.random.default_rng([seed, int(epoch), stream])
    here = positions // num == epoch
    out[here] = order.permutation(num)[positions[here] % num]
  return out


@dataclasses.dataclass(frozen=True)
class PromptSet:
  """Encoded prompts: int32 `tokens` `[num_prompts, max_prompt_length]`,
  right-padded, their `lengths` `[num_prompts]` (>= 1) and the reference
  `answers` (or None)."""

  tokens: np.ndarray
  lengths: np.ndarray
  answers: tuple[str, ...] | None = None

  def __len__(self) -> int:
    return self.tokens.shape[0]


def check_prompt_length(
    ids: Sequence[int], max_prompt_length: int, where: str
) -> None:
  """Fails closed, naming `where`, on a prompt the rollout cannot hold."""
  if len(ids) > max_prompt_length:
    raise ValueError(
        f"{where}: the prompt has {len(ids)} tokens, more than"
        f" rollout.max_prompt_length={max_prompt_length}."
    )


def encode_prompts(
    tokenizer,
    conversations,
    max_prompt_length: int,
    options: chat.ChatOptions = chat.ChatOptions(),
):
  """A `PromptSet` of `dataset.Conversation`s (`prompt_messages`), rendered
  with `options`, the switches SFT trained with."""
  rows, answers = [], []
  for conversation in conversations:
    messages, answer = prompt_messages(
        conversation.messages, conversation.where
    )
    ids = chat.encode_prompt(tokenizer, messages, options, conversation.where)
    check_prompt_length(ids, max_prompt_length, conversation.where)
    rows.append(ids)
    answers.append(answer)
  if not rows:
    raise ValueError("the prompt set is empty.")
  tokens = np.full((len(rows), max_prompt_length), tokenizer.pad_token_id)
  for i, ids in enumerate(rows):
    tokens[i, : len(ids)] = ids
  lengths = np.asarray([len(ids) for ids in rows], np.int32)
  return PromptSet(tokens.astype(np.int32), lengths, tuple(answers))
