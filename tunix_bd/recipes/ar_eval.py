# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Greedy exact-match evaluation of an AR model with Tunix's own Sampler.

This is the AR reference every block-diffusion number is compared with, so
it uses Tunix's stock KV-cached `Sampler`, not tunix_bd code.
"""

from __future__ import annotations

import time
from typing import Sequence

from flax import nnx
import transformers

from tunix_bd import compat
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib


def prompt_texts(
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
) -> list[str]:
  """Generation prompts (the context before the final assistant turn)."""
  return [
      tokenizer.apply_chat_template(
          list(c.messages[:-1]), add_generation_prompt=True, tokenize=False
      )
      for c in conversations
  ]


def make_sampler(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    cache_size: int,
) -> compat.Sampler:
  """Tunix's KV-cached AR Sampler for `model`, with `cache_size` slots."""
  config = model.config
  return compat.Sampler(
      model,
      tokenizer,
      compat.CacheConfig(
          cache_size=cache_size,
          num_layers=config.num_layers,
          num_kv_heads=config.num_kv_heads,
          head_dim=config.head_dim,
      ),
  )


def greedy_predictions(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    max_new_tokens: int,
    batch_size: int,
) -> list[str]:
  """Greedy completions (text before the first EOS) of each conversation."""
  return timed_greedy_predictions(
      model,
      tokenizer,
      conversations,
      max_new_tokens=max_new_tokens,
      batch_size=batch_size,
      warmup=False,
  )[0]


def timed_greedy_predictions(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    max_new_tokens: int,
    batch_size: int,
    warmup: bool = True,
) -> tuple[list[str], float]:
  """Greedy completions and the seconds spent decoding them.

  With `warmup`, the first batch is decoded once before the clock starts,
  so the time excludes compilation (every batch reuses one program).
  """
  prompts = prompt_texts(tokenizer, conversations)
  max_prompt_length = max(
      len(chat.encode_prompt(tokenizer, c.messages[:-1])) for c in conversations
  )
  sampler = make_sampler(model, tokenizer, max_prompt_length + max_new_tokens)

  def decode(chunk: list[str]) -> list[str]:
    # Pad the last chunk so every call reuses one compiled program.
    padded = chunk + [chunk[-1]] * (batch_size - len(chunk))
    output = sampler(
        padded,
        max_generation_steps=max_new_tokens,
        max_prompt_length=max_prompt_length,
        temperature=0.0,
        eos_tokens=[tokenizer.eos_token_id],
    )
    return output.text[: len(chunk)]

  if warmup:
    decode(prompts[:batch_size])
  start = time.perf_counter()
  predictions = []
  for i in range(0, len(prompts), batch_size):
    predictions.extend(decode(prompts[i : i + batch_size]))
  return predictions, time.perf_counter() - start


def exact_match(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    max_new_tokens: int,
    batch_size: int,
) -> tuple[dict[str, float], list[str]]:
  """Exact-match accuracy per task (and `"all"`) and the predictions."""
  predictions = greedy_predictions(
      model,
      tokenizer,
      conversations,
      max_new_tokens=max_new_tokens,
      batch_size=batch_size,
  )
  scores = tasks_lib.score_by_task(
      [c.task for c in conversations],
      predictions,
      [c.answer for c in conversations],
  )
  return scores, predictions
