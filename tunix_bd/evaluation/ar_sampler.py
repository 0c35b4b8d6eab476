# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Greedy decoding and exact match of an AR model with Tunix's own Sampler.

This is the AR reference every block-diffusion number is compared with, so
it uses Tunix's stock KV-cached `Sampler`, not tunix_bd code.
`write_exact_match` is AR pretraining's evaluation: the scores and every
prediction in `eval.json`, the table printed.
"""

from __future__ import annotations

from typing import Sequence

from flax import nnx
import numpy as np
import transformers

from tunix_bd import compat
from tunix_bd.evaluation import speed
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import scoring
from tunix_bd.evaluation import report


def prompt_texts(
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    options: chat.ChatOptions = chat.ChatOptions(),
) -> list[str]:
  """Generation prompts (the context before the final assistant turn)."""
  return [
      chat.prompt_text(tokenizer, c.messages[:-1], options)
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


def greedy_decoder(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    *,
    max_prompt_length: int,
    max_new_tokens: int,
    eos_tokens: Sequence[int] | None = None,
) -> speed.Decoder:
  """A `speed.Decoder` of prompt strings: greedy, stopping at EOS.

  Built once, so calls pay for decoding alone. Forwards count one per
  generated position plus the prefill. `eos_tokens` replaces the
  tokenizer's EOS as the ids that stop a row.
  """
  eos_tokens = list(eos_tokens or [tokenizer.eos_token_id])
  sampler = make_sampler(model, tokenizer, max_prompt_length + max_new_tokens)

  def decode(batch: Sequence[str]) -> speed.BatchOutput:
    out = sampler(
        list(batch),
        max_generation_steps=max_new_tokens,
        max_prompt_length=max_prompt_length,
        temperature=0.0,
        eos_tokens=eos_tokens,
    )
    lengths = np.asarray([len(t) for t in out.tokens])
    return speed.BatchOutput(out.text, lengths, lengths + 1)

  return decode


def greedy_predictions(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    max_new_tokens: int,
    batch_size: int,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> list[str]:
  """Greedy completions (text before the first EOS) of each conversation.

  `options` are the chat template's switches, the ones training used.
  """
  decode = greedy_decoder(
      model,
      tokenizer,
      max_prompt_length=max(
          len(chat.encode_prompt(tokenizer, c.messages[:-1], options))
          for c in conversations
      ),
      max_new_tokens=max_new_tokens,
  )
  prompts = prompt_texts(tokenizer, conversations, options)
  # Pad the last batch so every call reuses one compiled program.
  padded = prompts + [prompts[-1]] * (-len(prompts) % batch_size)
  texts = []
  for i in range(0, len(padded), batch_size):
    texts += decode(padded[i : i + batch_size]).texts
  return texts[: len(prompts)]


def exact_match(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    max_new_tokens: int,
    batch_size: int,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> tuple[dict[str, float], list[str]]:
  """Exact-match accuracy per task (and `"all"`) and the predictions."""
  predictions = greedy_predictions(
      model,
      tokenizer,
      conversations,
      max_new_tokens=max_new_tokens,
      batch_size=batch_size,
      options=options,
  )
  scores = scoring.score_by_task(
      [c.task for c in conversations],
      predictions,
      [c.answer for c in conversations],
  )
  return scores, predictions


def prediction_records(
    conversations: Sequence[dataset_lib.Conversation],
    predictions: Sequence[str],
) -> list[dict[str, str]]:
  """One `{"prompt", "answer", "prediction", "task"}` per conversation.

  `prompt` is the last user turn (the message before the answer).
  """
  return [
      {
          "prompt": c.messages[-2]["content"],
          "answer": c.answer,
          "prediction": p,
          "task": c.task,
      }
      for c, p in zip(conversations, predictions)
  ]


def write_exact_match(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    conversations: Sequence[dataset_lib.Conversation],
    *,
    path: str,
    max_new_tokens: int,
    batch_size: int,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> dict[str, float]:
  """`exact_match`, written to `path` and printed as a table.

  Args:
    model: the AR model.
    tokenizer: its tokenizer.
    conversations: the held-out conversations.
    path: the JSON file written (`eval.json`): `{"exact_match": {task:
      accuracy, "all": ...}, "predictions": prediction_records(...)}`.
    max_new_tokens: the greedy decoding budget.
    batch_size: prompts per decoding call.
    options: the chat template's switches, the ones training used.

  Returns:
    Exact-match accuracy per task and `"all"`.
  """
  scores, predictions = exact_match(
      model,
      tokenizer,
      conversations,
      max_new_tokens=max_new_tokens,
      batch_size=batch_size,
      options=options,
  )
  report.write_json(
      path,
      {
          "exact_match": scores,
          "predictions": prediction_records(conversations, predictions),
      },
  )
  print(
      report.percent_table(
          f"AR teacher greedy exact match on {len(conversations)}"
          " eval examples (Tunix Sampler):",
          scores,
      )
  )
  return scores
