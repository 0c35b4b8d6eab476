# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decoding a prompt set in calls of one size: the one way every stage does.

`generate.py` and the held-out evaluations of OPD and GRPO decode prompts
through `decode_prompts`, in calls of `batch_size` rows; the last call is
filled by wrapping around to the first prompts (`call_rows`), so every call
reuses one compiled program. A row decodes alike alone or in any batch
(`rng_test`), so the filler, whose results are dropped, changes nothing.
`greedy` scores held-out completions against their answers at several
commit thresholds; sampled evaluations pass explicit per-row seeds, so two
models are compared sample for sample.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import numpy as np

from tunix_bd.core import replayer
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import scoring
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as settings_lib


@dataclasses.dataclass(frozen=True)
class DecodeResult:
  """Completions of a prompt set, with what they cost.

  Attributes:
    texts: each prompt's completion, detokenized, stop token excluded.
    num_tokens: `[num_prompts]` completion tokens per prompt.
    num_forwards: `[num_prompts]` model forwards per prompt.
    tokens_per_forward: `[num_prompts]`.
    seconds: wall time of the decoding calls (compilation excluded when
      `decode_prompts` was asked to warm up).
    max_replay_error: the largest |replayed - recorded| log-prob, when
      replay was verified.
    correct: bool `[num_prompts]` exact match against the `PromptSet`'s
      answers, if it has them.
    final_correct: bool `[num_prompts]`, the final answers' match
      (`scoring.final_answer`), if the answers state results.
  """

  texts: list[str]
  num_tokens: np.ndarray
  num_forwards: np.ndarray
  tokens_per_forward: np.ndarray
  seconds: float
  max_replay_error: float | None
  correct: np.ndarray | None
  final_correct: np.ndarray | None = None


def call_rows(num_prompts: int, batch_size: int) -> list[np.ndarray]:
  """The prompt indices of each call: in order, the last call wrapped.

  `ceil(N / batch_size)` int arrays of `batch_size` indices each, in `[0,
  N)` (N = `num_prompts` >= 1): 0, 1, ..., N - 1, then 0, 1, ... to fill
  the last call.
  """
  if num_prompts < 1 or batch_size < 1:
    raise ValueError(
        f"need num_prompts >= 1 and batch_size >= 1, got {num_prompts},"
        f" {batch_size}."
    )
  index = np.arange(-(-num_prompts // batch_size) * batch_size) % num_prompts
  return [index[i : i + batch_size] for i in range(0, len(index), batch_size)]


def _as_prompt_set(prompts, pad_id: int) -> prompts_lib.PromptSet:
  if isinstance(prompts, prompts_lib.PromptSet):
    return prompts
  lengths = np.asarray([len(p) for p in prompts], np.int32)
  tokens = np.full((len(prompts), max(lengths.max(), 1)), pad_id, np.int32)
  for row, prompt in zip(tokens, prompts):
    row[: len(prompt)] = prompt
  return prompts_lib.PromptSet(tokens=tokens, lengths=lengths)


def decode_prompts(
    model: Any,
    tokenizer: Any,
    prompts: prompts_lib.PromptSet | Sequence[Sequence[int]],
    *,
    bd: Any,
    config: denoise.DenoiseConfig,
    batch_size: int,
    seeds: int | np.ndarray | None = None,
    warm_up: bool = False,
    verify_replay: bool = False,
    on_batch: Callable[[denoise.DenoiseOutput], None] | None = None,
) -> DecodeResult:
  """Decodes every prompt once, in calls of `batch_size` rows.

  Args:
    prompts: a `PromptSet`, or token ids per prompt.
    seeds: an int s (row i samples with seed s + i), int `[num_prompts]`
      per-row seeds (two models then sample alike prompt for prompt), or
      None for greedy decoding (the denoiser refuses to sample without).
    warm_up: decode the first call once untimed first, so `seconds`
      excludes compilation.
    verify_replay: replay each call's trace and report the largest
      log-prob difference.
    on_batch: called with each call's `DenoiseOutput` (its rows include the
      wrapped filler of the last call), e.g. to score the rollouts.
  """
  if not len(prompts):
    raise ValueError("no prompts to decode.")
  prompts = _as_prompt_set(prompts, config.pad_id)
  num = len(prompts)
  rows_of = [p[:n] for p, n in zip(prompts.tokens, prompts.lengths)]
  settings_lib.check_prompt_lengths(
      rows_of,
      config.max_prompt_length,
      key="max_prompt_length",
      where="the prompts",
  )
  if seeds is not None and np.ndim(seeds) == 0:
    seeds = int(seeds) + np.arange(num)
  elif seeds is not None and np.shape(seeds) != (num,):
    raise ValueError(f"seeds must have shape ({num},), got {np.shape(seeds)}.")
  denoiser = denoise.Denoiser(model, bd=bd, config=config)
  call = lambda rows: denoiser(
      prompts.tokens[rows],
      prompts.lengths[rows],
      seeds=None if seeds is None else np.asarray(seeds)[rows],
  )
  calls = call_rows(num, batch_size)
  if warm_up:
    call(calls[0])
  texts, lengths, forwards, error, seconds = [], [], [], 0.0, 0.0
  for rows in calls:
    start = time.perf_counter()
    out = call(rows)
    seconds += time.perf_counter() - start
    texts += [tokenizer.decode(c.tolist()) for c in out.completions]
    lengths += [len(c) for c in out.completions]
    forwards.append(out.num_forwards)
    if verify_replay:
      error = max(error, replayer.max_replay_error(model, out.trace))
    if on_batch is not None:
      on_batch(out)
  num_tokens = np.asarray(lengths[:num], np.int32)
  num_forwards = np.concatenate(forwards)[:num]
  texts = texts[:num]  # Without the last call's filler.
  answers = prompts.answers or ()
  score = lambda rule: np.asarray([rule(*pair) for pair in zip(texts, answers)])
  return DecodeResult(
      texts=texts,
      num_tokens=num_tokens,
      num_forwards=num_forwards,
      tokens_per_forward=num_tokens / np.maximum(num_forwards, 1),
      seconds=seconds,
      max_replay_error=error if verify_replay else None,
      correct=None if not answers else score(scoring.exact_match),
      final_correct=(
          score(scoring.final_match)
          if scoring.states_results(answers)
          else None
      ),
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
) -> dict[str, DecodeResult]:
  """Greedy decoding of prompts with answers, at each setting of
  `decode.sweep(thresholds)`: each threshold under the `threshold` rule,
  else the rule's own parameter alone.

  `on_first_batch` is `decode_prompts`' `on_batch` at the first setting.

  Returns:
    Each setting's label (`CommitSettings.label`) -> its `DecodeResult`, in
    `thresholds` order.
  """
  if prompts.answers is None:
    raise ValueError("held-out prompts need reference answers.")
  results = {}
  for i, config in enumerate(decode.sweep(thresholds, temperature=0.0)):
    results[config.label()] = decode_prompts(
        model,
        tokenizer,
        prompts,
        bd=bd,
        config=config,
        batch_size=batch_size,
        on_batch=on_first_batch if i == 0 else None,
    )
  return results


def greedy_metrics(results: dict[str, DecodeResult]) -> dict[str, float]:
  """`exact_match@L`, `final_answer@L` (answers that state results) and
  `tokens_per_forward@L` of each setting's label L (`greedy`'s keys:
  `exact_match@0.5`, `exact_match@top_k=2`)."""
  metrics = {}
  for label, decoded in results.items():
    metrics[f"exact_match@{label}"] = float(np.mean(decoded.correct))
    if decoded.final_correct is not None:
      metrics[f"final_answer@{label}"] = float(np.mean(decoded.final_correct))
    metrics[f"tokens_per_forward@{label}"] = float(
        np.mean(decoded.tokens_per_forward)
    )
  return metrics
