# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Greedy decoding and exact match of an AR model with Tunix's own Sampler.

The AR reference every block-diffusion number is compared with, so Tunix's
stock KV-cached `Sampler`, not tunix_bd code; `write_exact_match` is AR
pretraining's evaluation (`eval.json`).
"""

from __future__ import annotations

from typing import Sequence

from absl import logging
from flax import nnx
import numpy as np
import transformers

from tunix_bd import compat
from tunix_bd.evaluation import speed
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import scoring
from tunix_bd.evaluation import report


def greedy_decoder(
    model: nnx.Module,
    tokenizer: transformers.PreTrainedTokenizerBase,
    *,
    max_prompt_length: int,
    max_new_tokens: int,
    eos_tokens: Sequence[int] | None = None,
) -> speed.Decoder:
  """A `speed.Decoder` of prompt strings: greedy, stopping at EOS (or
  `eos_tokens`); forwards count one per generated position plus the
  prefill. Built once, so calls pay for decoding alone."""
  eos_tokens = list(eos_tokens or [tokenizer.eos_token_id])
  config = model.config
  sampler = compat.Sampler(
      model,
      tokenizer,
      compat.CacheConfig(
          cache_size=max_prompt_length + max_new_tokens,
          num_layers=config.num_layers,
          num_kv_heads=config.num_kv_heads,
          head_dim=config.head_dim,
      ),
  )

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


def prediction_records(
    conversations: Sequence[dataset_lib.Conversation],
    predictions: Sequence[str],
) -> list[dict[str, str]]:
  """One `{"prompt", "answer", "prediction", "task"}` per conversation
  (`prompt`: the last user turn)."""
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
  """Greedy exact match per task, written to `path` and printed as a table.

  `path` (`eval.json`) gets `{"exact_match": {task: accuracy, "all": ...},
  "predictions": prediction_records(...)}`; a prediction is the text before
  the first EOS within `max_new_tokens`. `options`: the chat switches
  training used.

  Returns:
    Exact-match accuracy per task and `"all"`.
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
  # The context before the final assistant turn.
  prompts = [
      chat.prompt_text(tokenizer, c.messages[:-1], options)
      for c in conversations
  ]
  # Pad the last batch so every call reuses one compiled program.
  padded = prompts + [prompts[-1]] * (-len(prompts) % batch_size)
  predictions = []
  for i in range(0, len(padded), batch_size):
    predictions += decode(padded[i : i + batch_size]).texts
  predictions = predictions[: len(prompts)]
  scores = scoring.score_by_task(
      [c.task for c in conversations],
      predictions,
      [c.answer for c in conversations],
  )
  report.write_json(
      path,
      {
          "exact_match": scores,
          "predictions": prediction_records(conversations, predictions),
      },
  )
  width = max(len(k) for k in scores)
  table = "\n".join(
      [
          f"AR teacher greedy exact match on {len(conversations)} eval"
          " examples (Tunix Sampler):"
      ]
      + [f"  {k:<{width}}  {v:7.2%}" for k, v in scores.items()]
  )
  logging.info("%s", table)
  print(table)
  return scores
