# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO's training prompts: rendered, checked, served as Tunix dataset items.

Each item is one batch of `prompts` (rendered chat strings, which the
rollout encodes) and `answer`s (for the reward functions), as `np.ndarray`s
(Tunix repeats each field G times with `np.repeat`), in seeded shuffled
epochs; Tunix resumes by skipping the items consumed, so a resumed run sees
the same prompts.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

import numpy as np

from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import jsonl
from tunix_bd.data import prompts as prompts_lib

_ORDER_STREAM = 0x5EED


@dataclasses.dataclass(frozen=True)
class RlPrompts:
  """str `[num]` generation prompts (rendered by the chat template) and
  their reference answers."""

  prompts: np.ndarray
  answers: np.ndarray

  def __len__(self) -> int:
    return len(self.prompts)


def conversations(
    data, num_eval: int
) -> tuple[list[dataset_lib.Conversation], list[dataset_lib.Conversation]]:
  """GRPO's train and held-out conversations of its `data` section.

  Train prompts: `data.prompts` (an RL JSONL), `data.train` (a chat JSONL)
  or, both empty, the embedded train split. Held-out prompts: `data.eval`
  (either form) or, empty, the embedded eval split; a user's train file
  needs a held-out file. `num_eval` is `eval.num_prompts`.
  """
  if data.prompts and data.train:
    raise ValueError(
        f"data.prompts={data.prompts!r} and data.train={data.train!r}"
        " are both set, but GRPO trains on one set: empty data.train (a chat"
        " JSONL) or data.prompts (an RL JSONL)."
    )
  user_train = "prompts" if data.prompts else "train"
  if getattr(data, user_train) and not data.eval:
    raise ValueError(
        f"data.eval must be set when data.{user_train} is a file: without it"
        " the held-out evaluation would score the embedded tasks. Set"
        ' data.eval to your held-out prompts ({"prompt", "answer"} or'
        " chat JSONL)."
    )
  if data.prompts:
    train = [
        dataset_lib.Conversation(
            [*r["messages"], {"role": "assistant", "content": r["answer"]}],
            dataset_lib.JSONL_TASK,
            where,
        )
        for where, r in jsonl.read_jsonl_records(data.prompts, kind="rl")
    ]
  else:
    train = dataset_lib.split_conversations(data, "train")
  held_out = dataset_lib.split_conversations(data, "eval")
  if len(held_out) < num_eval:
    source = (
        f"data.eval={data.eval!r}"
        if data.eval
        else f"the embedded eval split (data.num_eval={data.num_eval})"
    )
    raise ValueError(
        f"eval.num_prompts={num_eval} but {source} holds {len(held_out)}"
        f" prompts; set eval.num_prompts to at most {len(held_out)}."
    )
  return train, held_out


def render(
    tokenizer,
    conversations: Sequence[dataset_lib.Conversation],
    max_prompt_length: int,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> RlPrompts:
  """The generation prompts of conversations, as the rollout will see them,
  rendered with SFT's chat `options`; the text must re-encode to the
  template's tokens (the rollout encodes text, SFT encoded the messages).
  """
  if not conversations:
    raise ValueError("the GRPO prompt set is empty.")
  prompts, answers = [], []
  for conversation in conversations:
    where = conversation.where
    messages, answer = prompts_lib.prompt_messages(conversation.messages, where)
    text = chat.prompt_text(tokenizer, messages, options)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if tuple(ids) != chat.encode_prompt(tokenizer, messages, options):
      raise ValueError(
          f"{where}: the rendered prompt does not re-encode to the chat"
          " template's tokens (the rollout encodes the text), so GRPO would"
          " not show the prompt SFT trained on."
      )
    prompts_lib.check_prompt_length(ids, max_prompt_length, where)
    prompts.append(text)
    answers.append(answer)
  return RlPrompts(np.asarray(prompts), np.asarray(answers))


def train_and_eval_prompts(
    sources,
    data,
    *,
    num_eval: int,
    max_prompt_length: int,
) -> tuple[RlPrompts, prompts_lib.PromptSet]:
  """GRPO's training prompts (`render`) and held-out prompts, checked;
  `sources` are the policy's converted sources (`run.sources`)."""
  train, held_out = conversations(data, num_eval)
  return (
      render(sources.tokenizer, train, max_prompt_length, sources.chat_options),
      sources.encode_prompts(held_out, max_prompt_length),
  )


def items(
    prompts: RlPrompts, *, batch_size: int, seed: int
) -> Iterator[dict[str, np.ndarray]]:
  """Tunix dataset items of `batch_size` prompts each, without end."""
  index = 0
  while True:
    rows = prompts_lib.epoch_shuffled_indices(
        len(prompts), batch_size, index, seed=seed, stream=_ORDER_STREAM
    )
    yield dict(prompts=prompts.prompts[rows], answer=prompts.answers[rows])
    index += 1
