# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Timing decoders side by side: interleaved batches, fastest of repeats.

Every method decodes the same batch in turn (A, B, C on batch 0, then on
batch 1, ...), the whole set `repeats` times, and a method's time is the
sum over batches of its fastest repeat. Interference on a shared machine
only adds time, so the fastest try is the undisturbed speed and ratios
reproduce (docs/results.md, "How speeds are measured, and what
reproduces").
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tunix_bd.generate import denoise


@dataclasses.dataclass(frozen=True)
class BatchOutput:
  """What a decoder returns for one batch.

  Attributes:
    texts: the completion of each row.
    num_tokens: `[batch]` completion tokens of each row.
    num_forwards: `[batch]` model forwards each row needed.
    tokens: each row's completion token ids, if the decoder gives them
      (the peer column compares them).
  """

  texts: list[str]
  num_tokens: np.ndarray
  num_forwards: np.ndarray
  tokens: list[list[int]] | None = None


# Decodes one batch of `batch_size` prompts (every call has that size, so
# one compiled program serves them all).
Decoder = Callable[[Sequence], BatchOutput]


def denoiser_decoder(
    model: Any,
    tokenizer: Any,
    *,
    bd: Any,
    config: denoise.DenoiseConfig,
    **calls: Any,
) -> Decoder:
  """A `Decoder` of prompt token-id lists by block-diffusion denoising.

  The `Denoiser` is built once, so calls pay for decoding alone. `calls`:
  its model calls (`logits_fn`, `cached_logits_fn`), if not the default.
  """
  denoiser = denoise.Denoiser(model, bd=bd, config=config, **calls)

  def decode(batch: Sequence[Sequence[int]]) -> BatchOutput:
    out = denoiser(list(batch), seeds=np.arange(len(batch)))
    return BatchOutput(
        texts=[tokenizer.decode(c.tolist()) for c in out.completions],
        num_tokens=np.asarray([len(c) for c in out.completions]),
        num_forwards=out.num_forwards,
        tokens=[c.tolist() for c in out.completions],
    )

  return decode


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing(BatchOutput):
  """One method's outputs over all rows (of the first repeat) and `seconds`,
  its decoding time over all rows: per batch, its fastest repeat;
  `slowest_seconds` the same with each batch's slowest (the spread over
  repeats; None where not measured); `warmup_seconds` the untimed first
  batch's (compiling, mostly; None where not measured)."""

  seconds: float
  slowest_seconds: float | None = None
  warmup_seconds: float | None = None

  @property
  def tokens_per_s(self) -> float:
    return float(self.num_tokens.sum()) / max(self.seconds, 1e-9)

  @property
  def seconds_per_row(self) -> float:
    return self.seconds / len(self.texts)

  @property
  def tokens_per_forward(self) -> float:
    """The mean over rows of tokens / forwards."""
    return float(np.mean(self.num_tokens / np.maximum(self.num_forwards, 1)))


def measure(
    decoders: Mapping[str, Decoder],
    inputs: Mapping[str, Sequence],
    *,
    batch_size: int,
    repeats: int = 1,
) -> dict[str, Timing]:
  """Decodes every method's inputs batch by batch, methods interleaved.

  `inputs`: each method's prompts (the same, in the form its decoder
  takes). The last batch is padded with copies of the last prompt, whose
  outputs are dropped. Each method first decodes one batch untimed
  (compiling); then every batch `repeats` times, each counting its fastest.
  """
  lengths = {len(inputs[m]) for m in decoders}
  if len(lengths) != 1 or not lengths.pop():
    raise ValueError("every method needs the same, non-zero number of rows.")
  if batch_size < 1 or repeats < 1:
    raise ValueError(
        f"batch_size={batch_size}, repeats={repeats} must be >= 1."
    )
  num_rows = len(inputs[next(iter(decoders))])
  padded = {
      m: list(inputs[m]) + [inputs[m][-1]] * (-num_rows % batch_size)
      for m in decoders
  }
  starts = range(0, num_rows, batch_size)
  warmup = {}
  for method, decode in decoders.items():  # Compile outside the clock.
    begin = time.perf_counter()
    decode(padded[method][:batch_size])
    warmup[method] = time.perf_counter() - begin
  # seconds[method][repeat, batch]
  seconds = {m: np.zeros((repeats, len(starts))) for m in decoders}
  outputs = {m: [] for m in decoders}
  for repeat in range(repeats):
    for b, start in enumerate(starts):
      for method, decode in decoders.items():
        batch = padded[method][start : start + batch_size]
        begin = time.perf_counter()
        out = decode(batch)
        seconds[method][repeat, b] = time.perf_counter() - begin
        if repeat == 0:
          outputs[method].append(out)
  timings = {}
  for method, outs in outputs.items():
    tokens = None
    if all(o.tokens is not None for o in outs):
      tokens = [list(t) for o in outs for t in o.tokens][:num_rows]
    timings[method] = Timing(
        texts=[t for o in outs for t in o.texts][:num_rows],
        num_tokens=np.concatenate([o.num_tokens for o in outs])[:num_rows],
        num_forwards=np.concatenate([o.num_forwards for o in outs])[:num_rows],
        seconds=float(seconds[method].min(axis=0).sum()),
        slowest_seconds=float(seconds[method].max(axis=0).sum()),
        warmup_seconds=warmup[method],
        tokens=tokens,
    )
  return timings
