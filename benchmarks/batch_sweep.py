# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""One workload's decoding speed at every batch size, beside its roofline.

For each batch size the methods are timed interleaved (`speed.measure`),
scored against the reference answers when there are any, and set beside
the cost of one cached forward over a token and over a block
(`decode_table.forward_costs`) and the workload's tokens-per-forward
ceiling (`comparison.tpf_ceiling`), as `decode_table.cells`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from benchmarks import decode_table
from benchmarks import peer as peer_lib
from tunix_bd.data import scoring
from tunix_bd.evaluation import comparison
from tunix_bd.evaluation import speed


def measure(
    decoders: Mapping[str, speed.Decoder],
    inputs: Mapping[str, Sequence],
    *,
    batch_sizes: Sequence[int],
    repeats: int,
    blocks: Mapping[str, int],
    models: Mapping[int, Any],
    cached: Mapping[str, bool],
    budget: int,
    lengths: tuple[list[int], list[int], list[bool] | None],
    answers: Sequence[str] | None = None,
    one_batch: bool = False,
    check: Callable[[dict[str, speed.Timing]], None] | None = None,
) -> dict[str, Any]:
  """The TPF ceilings, and the cells and forward costs of every batch size.

  Args:
    decoders: per method, its timed decoder.
    inputs: per method, every prompt in the form its decoder takes.
    batch_sizes: rows per call, one measurement each.
    repeats: passes over all batches; each batch counts its fastest.
    blocks: per method, its block size (1 for AR).
    models: per block size, the model whose forwards the roofline times.
    cached: per method, whether it decodes with a KV cache (only those get
      a roofline).
    budget: the generation budget.
    lengths: `(prompt lengths, answer lengths, stopped or None)` for the
      ceilings (`comparison.tpf_ceiling`).
    answers: per prompt, the reference answer; None: no exact match.
    one_batch: decode only the first `batch_size` prompts per batch size.
    check: called with each batch size's timings (e.g. to check a schedule).

  Returns:
    `{"tpf_ceiling", "cells", "forward_seconds"}` (and `"peer_agreement"`
    with a `peer` method), the last ones keyed `batch=B`.
  """
  prompts, answer_lengths, stopped = lengths
  ceilings = {
      size: comparison.tpf_ceiling(
          prompts, answer_lengths, size, stopped=stopped
      )
      for size in models
  }
  out = {"tpf_ceiling": ceilings, "cells": {}, "forward_seconds": {}}
  for batch_size in batch_sizes:
    rows = {m: x[:batch_size] if one_batch else x for m, x in inputs.items()}
    timings = speed.measure(
        decoders, rows, batch_size=batch_size, repeats=repeats
    )
    if check:
      check(timings)
    correct = None
    if answers is not None:
      correct = {
          m: [scoring.exact_match(t, a) for t, a in zip(x.texts, answers)]
          for m, x in timings.items()
      }
    key = f"batch={batch_size}"
    if "peer" in timings:
      out.setdefault("peer_agreement", {})[key] = peer_lib.agreement(
          timings["peer"].tokens, timings["bd_cached"].tokens
      )
    costs = decode_table.forward_costs(
        models,
        batch_size=batch_size,
        max_prompt_length=max(prompts),
        max_new_tokens=budget,
        repeats=repeats,
    )
    out["forward_seconds"][key] = costs
    hbm_seconds = decode_table.forward_hbm_seconds(
        models,
        batch_size=batch_size,
        max_prompt_length=max(prompts),
        max_new_tokens=budget,
    )
    out["cells"][key] = decode_table.cells(
        timings,
        correct=correct,
        blocks=blocks,
        cached=cached,
        costs=costs,
        ceilings=ceilings,
        batch_size=batch_size,
        hbm_seconds=hbm_seconds,
    )
  return out
