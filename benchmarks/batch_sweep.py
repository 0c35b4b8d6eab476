# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""One workload's decoding speed at every batch size, beside its roofline.

For each batch size the methods are timed interleaved (`speed.measure`)
with the model-free twins of our decoding loop's methods
(`roofline.engine_decoders`), scored against the reference answers when
there are any, and set beside the time their forwards take inside their
programs (`roofline.engine_seconds`), the HBM roofline and the workload's
tokens-per-forward ceiling (`comparison.tpf_ceiling`), as
`decode_table.cells`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from benchmarks import decode_table
from benchmarks import peer as peer_lib
from benchmarks import roofline
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
    engines: Mapping[str, tuple[speed.Decoder, speed.Decoder | None]],
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
    models: per block size, the model whose forwards the HBM roofline reads.
    cached: per method, whether it decodes with a KV cache (only those get
      an HBM roofline).
    engines: per method of our decoding loop, its model-free twins
      (`roofline.engine_decoders`); they take the method's inputs.
    budget: the generation budget.
    lengths: `(prompt lengths, answer lengths, stopped or None)` for the
      ceilings (`comparison.tpf_ceiling`).
    answers: per prompt, the reference answer; None: no exact match.
    one_batch: decode only the first `batch_size` prompts per batch size.
    check: called with each batch size's timings (e.g. to check a schedule).

  Returns:
    `{"tpf_ceiling", "cells", "forward_seconds"}` (and `"peer_agreement"`
    with a `peer` method), the last ones keyed `batch=B`;
    `forward_seconds` per method of `engines`: the seconds of one forward
    inside its decoding program.
  """
  prompts, answer_lengths, stopped = lengths
  ceilings = {
      size: comparison.tpf_ceiling(
          prompts, answer_lengths, size, stopped=stopped
      )
      for size in models
  }
  out = {"tpf_ceiling": ceilings, "cells": {}, "forward_seconds": {}}
  # The twins decode in the same interleaved rounds as their methods.
  twins = {
      f"{m} engine {i}": (m, d)
      for m, pair in engines.items()
      for i, d in enumerate(pair)
      if d is not None
  }
  every = {**decoders, **{k: d for k, (_, d) in twins.items()}}
  for batch_size in batch_sizes:
    rows = {m: x[:batch_size] if one_batch else x for m, x in inputs.items()}
    rows.update({k: rows[m] for k, (m, _) in twins.items()})
    timings = speed.measure(every, rows, batch_size=batch_size, repeats=repeats)
    twin_timings = {k: timings.pop(k) for k in twins}
    engine = {
        m: roofline.engine_seconds(
            timings[m],
            tuple(twin_timings.get(f"{m} engine {i}") for i in range(2)),
            batch_size,
        )
        for m in engines
    }
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
    out["forward_seconds"][key] = {
        m: (
            (timings[m].seconds - e)
            / max(roofline.iterations(timings[m].num_forwards, batch_size), 1)
        )
        for m, e in engine.items()
    }
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
        engine=engine,
        ceilings=ceilings,
        batch_size=batch_size,
        hbm_seconds=hbm_seconds,
    )
  return out
