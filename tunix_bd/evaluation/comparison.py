# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""AR vs block diffusion on one prompt set: the rows' table, frontier and
headline, and the tokens-per-forward ceiling of a block decoder.

The rows are `comparison_report.evaluate`'s, one per method: Tunix's
`Sampler` on the AR teacher (`AR_SAMPLER`, the reference), the teacher in
tunix_bd's loop with one-token blocks (`AR_LOOP`: separates what parallel
denoising saves from what the implementation does) and the converted model
at each commit threshold (`threshold_method`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

AR_SAMPLER = "AR (Tunix Sampler)"
AR_LOOP = "AR, one-token blocks"


def threshold_method(threshold: float) -> str:
  return f"BD threshold {threshold}"


def format_table(rows: Sequence[dict[str, Any]], batch_size: int) -> str:
  """The rows as an aligned text table."""
  header = (
      f"{'method':<22}{'exact':>7}{'tok/fwd':>8}"
      f"{'b1 ms':>8}{'vs AR':>7}{f'b{batch_size} tok/s':>12}{'vs AR':>7}"
  )
  lines = [header]
  for r in rows:
    lines.append(
        f"{r['method']:<22}{r['exact_match']:>7.1%}"
        f"{r['tokens_per_forward']:>8.2f}{r['batch1_ms']:>8.2f}"
        f"{r['batch1_speedup_vs_ar']:>7.2f}{r['tokens_per_s']:>12.0f}"
        f"{r['throughput_vs_ar']:>7.2f}"
    )
  return "\n".join(lines)


def frontier(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict]]:
  """Exact match vs tokens per forward per model stage (`plot_frontier`).

  The AR teacher is one point (our loop: one forward per token and per
  stop token); the converted model one point per commit threshold.
  """
  point = lambda r, label: dict(r, label=label)  # The row, labelled.
  return {
      "AR teacher": [
          point(r, "AR, our loop") for r in rows if r["method"] == AR_LOOP
      ],
      "block-diffusion SFT": [
          point(r, f"{r['threshold']}")
          for r in rows
          if r["threshold"] is not None
      ],
  }


def recommended(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """The block-diffusion row to quote: the threshold fastest at batch 1
  among those within one point of the AR teacher's exact match (the most
  accurate if none is)."""
  sampler = next(r for r in rows if r["method"] == AR_SAMPLER)
  candidates = [r for r in rows if r["threshold"] is not None]
  close = [
      r for r in candidates if r["exact_match"] >= sampler["exact_match"] - 0.01
  ]
  if close:
    return min(close, key=lambda r: r["batch1_ms"])
  return max(candidates, key=lambda r: r["exact_match"])


def headline(rows: Sequence[dict[str, Any]], batch_size: int) -> str:
  """The `recommended` row, at both speeds, and what block diffusion is
  for."""
  by_method = {r["method"]: r for r in rows}
  sampler, loop = by_method[AR_SAMPLER], by_method[AR_LOOP]
  best = recommended(rows)
  return (
      f"Headline, block diffusion at threshold {best['threshold']}:"
      f" {best['exact_match']:.1%} exact match (AR"
      f" {sampler['exact_match']:.1%}) at {best['tokens_per_forward']:.2f}"
      f" tokens per forward (AR {loop['tokens_per_forward']:.2f}). Batch-1"
      f" latency {best['batch1_ms']:.2f} ms per prompt,"
      f" {best['batch1_speedup_vs_ar']:.2f}x Tunix's Sampler and"
      f" {loop['batch1_ms'] / best['batch1_ms']:.2f}x our AR loop. Batch"
      f" {batch_size} throughput {best['tokens_per_s']:.0f} tokens/s,"
      f" {best['throughput_vs_ar']:.2f}x the Sampler and"
      f" {best['tokens_per_s'] / max(loop['tokens_per_s'], 1e-9):.2f}x our AR"
      " loop. Block diffusion is for latency: it cuts the sequential forwards"
      " an answer waits on. A large batch already fills the machine, where a"
      " forward over a block costs more than one over a token, so throughput"
      " gains little or loses."
  )


def tpf_ceiling(
    prompt_lengths: Sequence[int],
    answer_lengths: Sequence[int],
    block_size: int,
    *,
    stopped: Sequence[bool] | None = None,
) -> float:
  """The mean over rows of answer tokens over the blocks they touch.

  A row's answer (`answer_lengths` n, stop token excluded) occupies logical
  positions `P .. P + n - 1` (P: `prompt_lengths`) and its stop token
  `P + n`; decoding each touched block in one forward is the best a block
  decoder can do, so `n / blocks` bounds its tokens per forward. Lengths are
  `[rows]`; `stopped` (`[rows]`, default all) says whether a row ends with a
  stop token; one without touches only its answer's blocks.
  """
  p = np.asarray(prompt_lengths, np.int64)
  n = np.asarray(answer_lengths, np.int64)
  stop = np.ones_like(n, bool) if stopped is None else np.asarray(stopped)
  last = p + n - 1 + stop.astype(np.int64)  # The last position touched.
  blocks = last // block_size - p // block_size + 1
  return float(np.mean(n / np.maximum(blocks, 1)))
