# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Datasets as fixed-length token rows, and their grain batch pipelines.

Conversations (the embedded task or a user's JSONL) are encoded once, up
front, into right-padded rows, so a bad or over-long record fails before any
compute, named. Batches are a deterministic function of `(seed, epoch,
step)`, so a resumed run that skips trained batches sees the same data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import grain
import numpy as np
import transformers

from tunix_bd.data import chat
from tunix_bd.data import jsonl
from tunix_bd.data import tasks as tasks_lib

# Task label of records that come from a user's file.
JSONL_TASK = "jsonl"


@dataclasses.dataclass(frozen=True)
class Conversation:
  """A conversation with what scoring needs to know about it."""

  messages: Sequence[Mapping[str, str]]
  task: str
  where: str  # How errors name it, e.g. `data.jsonl:12` or `train[7]`.

  @property
  def answer(self) -> str:
    return self.messages[-1]["content"]


@dataclasses.dataclass(frozen=True)
class TokenizedDataset:
  """Conversations encoded into right-padded rows.

  Attributes:
    tokens: `[num_examples, max_length]` int32, padded with the pad id.
    prompt_lengths: `[num_examples]` int32, tokens before the completion.
    lengths: `[num_examples]` int32, prompt plus completion (EOS included).
    conversations: the source conversations, in row order.
  """

  tokens: np.ndarray
  prompt_lengths: np.ndarray
  lengths: np.ndarray
  conversations: tuple[Conversation, ...]

  def __len__(self) -> int:
    return self.tokens.shape[0]

  @property
  def max_length(self) -> int:
    return self.tokens.shape[1]

  def row(self, index: int) -> dict[str, np.ndarray]:
    """One example as `{"tokens", "completion_mask", "valid_mask"}` `[L]`."""
    positions = np.arange(self.max_length)
    valid = positions < self.lengths[index]
    completion = valid & (positions >= self.prompt_lengths[index])
    return {
        "tokens": self.tokens[index],
        "completion_mask": completion,
        "valid_mask": valid,
    }

  __getitem__ = row  # A grain random-access source (`batches`).


def embedded_conversations(
    mix: tasks_lib.TaskMix, split: str, num_examples: int
) -> list[Conversation]:
  """The first `num_examples` conversations of an embedded split."""
  return [
      Conversation(e.messages(), e.task, f"{split}[{i}]")
      for i, e in enumerate(mix.examples(split, num_examples))
  ]


def _task_mix(data: Any) -> tasks_lib.TaskMix:
  return tasks_lib.TaskMix(
      tasks=tuple(data.tasks),
      min_len=data.min_len,
      max_len=data.max_len,
      seed=data.seed,
  )


def split_conversations(data: Any, split: str) -> list[Conversation]:
  """The conversations of one split of a `data` section (here and below, a
  `data.settings.Data` or a config section with its keys)."""
  path = getattr(data, split)
  if path:
    # A user's chat or prompt/completion JSONL file, each record named
    # `path:line`. A held-out file may also hold `{"prompt", "answer"}`
    # records, as GRPO's does (`jsonl`'s "held_out" kind).
    kind = "held_out" if split == "eval" else "sft"
    return [
        Conversation(r["messages"], JSONL_TASK, where)
        for where, r in jsonl.read_jsonl_records(path, kind=kind)
    ]
  return embedded_conversations(
      _task_mix(data), split, getattr(data, f"num_{split}")
  )


def conversations(
    data: Any,
) -> tuple[list[Conversation], list[Conversation]]:
  """`(train, eval)` conversations of a `data` section; an empty path is
  the embedded tasks' split. A `train` file needs an `eval` file (a user's
  task is never scored on the embedded one)."""
  if data.train and not data.eval:
    raise ValueError("data.eval must be set when data.train is a file.")
  return split_conversations(data, "train"), split_conversations(data, "eval")


def train_conversations(data: Any, recipe: str) -> list[Conversation]:
  """The train split, for a recipe that reads no held-out set (a set
  `data.eval` is refused, since `recipe` would not read it)."""
  if data.eval:
    raise ValueError(
        f"data.eval={data.eval!r} is set, but {recipe} reads no held-out"
        " set; empty data.eval."
    )
  return split_conversations(data, "train")


def prompt_records(
    data: Any,
) -> tuple[list[dict[str, Any]], str]:
  """`([{"messages", "answer", "task"}], source)`: the prompts to decode and
  score, from `data.prompts` (a `{"prompt", "answer"}` JSONL; empty: the
  embedded tasks' eval split), and how errors name the set."""
  if data.prompts:
    records = jsonl.read_jsonl(data.prompts, kind="rl")
    records = [dict(r, task=JSONL_TASK) for r in records]
    return records, f"data.prompts={data.prompts!r}"
  # `PromptData` checked `data.num_prompts`.
  records = [
      {"messages": e.messages()[:1], "answer": e.answer, "task": e.task}
      for e in _task_mix(data).examples("eval", data.num_prompts)
  ]
  return records, "the embedded task's eval prompts"


def tokenize(
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[Conversation],
    max_length: int,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> TokenizedDataset:
  """Encodes conversations into rows of `max_length` tokens, rendered with
  `options`; one that does not fit is refused, named, never truncated."""
  if max_length < 2:
    raise ValueError(f"data.max_length must be >= 2, got {max_length}.")
  if not conversations:
    raise ValueError("the dataset has no conversations.")
  pad_id = tokenizer.pad_token_id
  tokens = np.full((len(conversations), max_length), pad_id, np.int32)
  prompt_lengths = np.zeros(len(conversations), np.int32)
  lengths = np.zeros(len(conversations), np.int32)
  for i, conversation in enumerate(conversations):
    prompt_ids, completion_ids = chat.encode_conversation(
        tokenizer, conversation.messages, conversation.where, options
    )
    ids = prompt_ids + completion_ids
    if len(ids) > max_length:
      raise ValueError(
          f"{conversation.where}: {len(ids)} tokens do not fit in "
          f"data.max_length={max_length}; raise data.max_length or drop the "
          "record."
      )
    tokens[i, : len(ids)] = ids
    prompt_lengths[i] = len(prompt_ids)
    lengths[i] = len(ids)
  return TokenizedDataset(tokens, prompt_lengths, lengths, tuple(conversations))


def tokenized_splits(
    tokenizer: transformers.PreTrainedTokenizerBase, data: Any
) -> tuple[TokenizedDataset, TokenizedDataset]:
  """Train and eval rows of a `data` section, `data.max_length` wide, with
  its `enable_thinking` passed to the chat template."""
  options = chat.options_from_data(data)
  train, held_out = conversations(data)
  return (
      tokenize(tokenizer, train, data.max_length, options),
      tokenize(tokenizer, held_out, data.max_length, options),
  )


def check_batch_size(
    dataset: TokenizedDataset, batch_size: int, key: str
) -> None:
  """Fails closed, naming `key`, on batches larger than the dataset."""
  if batch_size > len(dataset):
    raise ValueError(
        f"{key}={batch_size} exceeds the {len(dataset)} examples of its"
        f" dataset; lower {key} or give more examples."
    )


def batches(
    dataset: TokenizedDataset,
    batch_size: int,
    *,
    seed: int,
    num_epochs: int | None = None,
    shuffle: bool = True,
    key: str = "batch_size",
) -> grain.MapDataset:
  """A deterministic grain pipeline of `{"tokens", "completion_mask",
  "valid_mask"}` numpy batches, `[batch_size, max_length]`.

  The last partial batch is dropped; each epoch reshuffles from `seed`
  (unless not `shuffle`); `num_epochs=None` repeats forever; `key` names
  `batch_size` in errors (e.g. "eval.batch_size").
  """
  if batch_size < 1:
    raise ValueError(f"{key} must be >= 1, got {batch_size}.")
  check_batch_size(dataset, batch_size, key)
  ds = grain.MapDataset.source(dataset)
  if shuffle:
    ds = ds.seed(seed).shuffle()
  ds = ds.repeat(num_epochs)
  return ds.batch(batch_size, drop_remainder=True)
