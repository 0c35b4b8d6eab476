# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decoding a prompt set in fixed-size batches, timed, with one program.

The last batch is padded with copies of the last prompt, so every call has
the same shape and reuses one compiled program; results are cut back to the
prompts given. Used by the `generate` recipe and the evaluations.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np

from tunix_bd.core import replayer
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
    seconds: wall time of decoding, compilation excluded.
    max_replay_error: the largest |replayed - recorded| log-prob, when
      replay was verified.
  """

  texts: list[str]
  num_tokens: np.ndarray
  num_forwards: np.ndarray
  tokens_per_forward: np.ndarray
  seconds: float
  max_replay_error: float | None


def decode_prompts(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    *,
    bd: Any,
    config: denoise.DenoiseConfig,
    batch_size: int,
    seed: int = 0,
    verify_replay: bool = False,
) -> DecodeResult:
  """Decodes `prompts` (token ids per row) in batches of `batch_size`.

  The first batch is decoded twice: once to compile, once timed, so
  `seconds` measures decoding only (not replay verification). Row `i`
  samples with seed `seed + i`.

  Raises:
    ValueError: before any compute, for an empty prompt set or a prompt
      longer than `config.max_prompt_length` (naming the rows).
  """
  if not prompts:
    raise ValueError("no prompts to decode.")
  settings_lib.check_prompt_lengths(
      prompts,
      config.max_prompt_length,
      key="max_prompt_length",
      where="the prompts",
  )
  padded = list(prompts) + [prompts[-1]] * (-len(prompts) % batch_size)
  seeds = seed + np.arange(len(padded))
  batches = range(0, len(padded), batch_size)
  denoiser = denoise.Denoiser(model, bd=bd, config=config)
  denoiser(padded[:batch_size], seeds=seeds[:batch_size])
  texts, lengths, forwards, error, seconds = [], [], [], 0.0, 0.0
  for i in batches:
    start = time.perf_counter()
    out = denoiser(padded[i : i + batch_size], seeds=seeds[i : i + batch_size])
    seconds += time.perf_counter() - start
    texts += [tokenizer.decode(c.tolist()) for c in out.completions]
    lengths += [len(c) for c in out.completions]
    forwards.append(out.num_forwards)
    if verify_replay:
      error = max(error, replayer.max_replay_error(model, out.trace))
  n = len(prompts)
  num_tokens = np.asarray(lengths[:n], np.int32)
  num_forwards = np.concatenate(forwards)[:n]
  return DecodeResult(
      texts=texts[:n],
      num_tokens=num_tokens,
      num_forwards=num_forwards,
      tokens_per_forward=num_tokens / np.maximum(num_forwards, 1),
      seconds=seconds,
      max_replay_error=error if verify_replay else None,
  )
