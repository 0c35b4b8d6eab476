# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decoding held-out prompts and scoring them: exact match, tokens/forward.

A training loss says little about decoding, so OPD and GRPO evaluate a
block-diffusion model by decoding held-out prompts and scoring each
completion against its reference answer. `decode_prompts` decodes a
`PromptSet` once through `generate.prompt_batches`, the one way every
stage decodes a prompt set; `greedy` does so at several commit thresholds,
and sampled decoding takes explicit per-row seeds, so two models decoded
with the same seeds are compared sample for sample.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import scoring
from tunix_bd.generate import denoise
from tunix_bd.generate import prompt_batches


@dataclasses.dataclass(frozen=True)
class Decoded:
  """Every prompt's completion, scored.

  Attributes:
    texts: `[num_prompts]` completions (before the first stop token).
    correct: bool `[num_prompts]` exact match against the answers.
    tokens_per_forward: float `[num_prompts]` completion tokens over the
      forwards the row needed.
  """

  texts: list[str]
  correct: np.ndarray
  tokens_per_forward: np.ndarray

  @property
  def exact_match(self) -> float:
    return float(np.mean(self.correct))

  @property
  def mean_tokens_per_forward(self) -> float:
    return float(np.mean(self.tokens_per_forward))


def decode_prompts(
    model: Any,
    prompts: prompts_lib.PromptSet,
    *,
    bd: Any,
    config: denoise.DenoiseConfig,
    tokenizer: Any,
    batch_size: int,
    seeds: np.ndarray | None = None,
    on_batch: Callable[[denoise.DenoiseOutput], None] | None = None,
) -> Decoded:
  """Decodes every prompt once with `config` and scores it.

  `prompts` must have answers. `seeds` (int `[num_prompts]`, per row) are
  required when sampling. `on_batch` gets each call's `DenoiseOutput`, whose
  rows include the wrapped filler of the last batch.
  """
  if prompts.answers is None:
    raise ValueError("held-out prompts need reference answers.")
  result = prompt_batches.decode_prompts(
      model,
      tokenizer,
      prompts,
      bd=bd,
      config=config,
      batch_size=batch_size,
      seeds=seeds,
      on_batch=on_batch,
  )
  correct = [
      scoring.exact_match(t, a) for t, a in zip(result.texts, prompts.answers)
  ]
  return Decoded(
      texts=result.texts,
      correct=np.asarray(correct),
      tokens_per_forward=result.tokens_per_forward,
  )


def greedy(
    model: Any,
    prompts: prompts_lib.PromptSet,
    *,
    bd: Any,
    decode: denoise.DenoiseConfig,
    thresholds: Sequence[float],
    tokenizer: Any,
    batch_size: int,
    on_first_batch: Callable[[denoise.DenoiseOutput], None] | None = None,
) -> dict[float, Decoded]:
  """Greedy decoding of the prompts at each commit threshold.

  `decode`'s threshold is replaced by each of `thresholds` and its
  temperature by 0; `on_first_batch` is `decode_prompts`' `on_batch` at the
  first threshold.

  Returns:
    Threshold -> its `Decoded`, in `thresholds` order.
  """
  results = {}
  for i, threshold in enumerate(thresholds):
    config = dataclasses.replace(
        decode, threshold=float(threshold), temperature=0.0
    )
    results[float(threshold)] = decode_prompts(
        model,
        prompts,
        bd=bd,
        config=config,
        tokenizer=tokenizer,
        batch_size=batch_size,
        on_batch=on_first_batch if i == 0 else None,
    )
  return results


def greedy_metrics(results: dict[float, Decoded]) -> dict[str, float]:
  """`exact_match@T` and `tokens_per_forward@T` of each threshold T."""
  metrics = {}
  for threshold, decoded in results.items():
    metrics[f"exact_match@{threshold}"] = decoded.exact_match
    metrics[f"tokens_per_forward@{threshold}"] = decoded.mean_tokens_per_forward
  return metrics
