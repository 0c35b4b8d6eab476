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
  """The rows as an aligned text table (ratios against the Sampler)."""
  sizes = sorted(rows[0]["tokens_per_s_at"], key=int)
  header = (
      f"{'method':<22}{'exact':>7}{'final':>7}{'tok/fwd':>8}"
      f"{'b1 ms':>8}{'ms/fwd':>7}{'vs AR':>7}"
      + "".join(f"{f'b{b} tok/s':>11}{'vs AR':>7}" for b in sizes)
      + f"{f'b{batch_size} tok/s':>12}{'vs AR':>7}"
  )
  sampler = {r["method"]: r for r in rows}.get(AR_SAMPLER, rows[0])
  lines = [header]
  for r in rows:
    at = r["tokens_per_s_at"]
    lines.append(
        f"{r['method']:<22}{r['exact_match']:>7.1%}{r['final_answer']:>7.1%}"
        f"{r['tokens_per_forward']:>8.2f}{r['batch1_ms']:>8.2f}"
        f"{r['batch1_ms_per_forward']:>7.3f}"
        f"{r['batch1_speedup_vs_ar']:>7.2f}"
        + "".join(
            f"{at[b]:>11.0f}"
            f"{at[b] / max(sampler['tokens_per_s_at'][b], 1e-9):>7.2f}"
            for b in sizes
        )
        + f"{r['tokens_per_s']:>12.0f}{r['throughput_vs_ar']:>7.2f}"
    )
  return "\n".join(lines)


def parallelism_summary(rows: Sequence[dict[str, Any]]) -> str:
  """What parallel commits cost in accuracy, threshold by threshold: each
  block-diffusion row against our AR loop (final-answer accuracy, tokens
  per forward and their share of the ceiling, and a batch-1 forward's cost
  relative to an AR-loop forward)."""
  loop = {r["method"]: r for r in rows}[AR_LOOP]
  lines = [
      "Accuracy under parallelism (final answer, against our AR loop at"
      f" {loop['final_answer']:.1%} and {loop['tokens_per_forward']:.2f} tokens"
      " per forward):"
  ]
  for r in rows:
    if r["threshold"] is None:
      continue
    ceiling = r["tpf_ceiling"] or float("nan")
    cost = r["batch1_ms_per_forward"] / loop["batch1_ms_per_forward"]
    accuracy = r["final_answer"]
    lines.append(
        f"  threshold {r['threshold']}: {accuracy:.1%}"
        f" ({100 * (accuracy - loop['final_answer']):+.1f} points) at"
        f" {r['tokens_per_forward']:.2f} tokens per forward"
        f" ({r['tokens_per_forward'] / ceiling:.0%} of the ceiling"
        f" {ceiling:.2f}); a forward costs {cost:.2f}x an AR-loop forward."
    )
  return "\n".join(lines)


def frontier(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict]]:
  """`plot_frontier`'s points per model stage: the AR teacher's (our loop)
  and the converted model's, one per commit threshold."""
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
  among those within one point of the Sampler's final-answer accuracy (the
  most accurate if none is)."""
  sampler = {r["method"]: r for r in rows}[AR_SAMPLER]
  candidates = [r for r in rows if r["threshold"] is not None]
  accuracy = lambda r: r["final_answer"]
  close = [r for r in candidates if accuracy(r) >= accuracy(sampler) - 0.01]
  if close:
    return min(close, key=lambda r: r["batch1_ms"])
  return max(candidates, key=accuracy)


def headline(rows: Sequence[dict[str, Any]], batch_size: int) -> str:
  """The recommended block-diffusion row at every speed, and what it is for."""
  by_method = {r["method"]: r for r in rows}
  sampler, loop = by_method[AR_SAMPLER], by_method[AR_LOOP]
  best = recommended(rows)
  at = best["tokens_per_s_at"]
  extra = "".join(
      f" Batch {b}: {at[b]:.0f} tokens/s,"
      f" {at[b] / max(loop['tokens_per_s_at'][b], 1e-9):.2f}x our AR loop."
      for b in sorted(at, key=int)
  )
  return (
      f"Headline, block diffusion at threshold {best['threshold']}:"
      f" {best['exact_match']:.1%} exact match (AR"
      f" {sampler['exact_match']:.1%}), {best['final_answer']:.1%} final"
      f" answer (AR {sampler['final_answer']:.1%}) at"
      f" {best['tokens_per_forward']:.2f}"
      f" tokens per forward (AR {loop['tokens_per_forward']:.2f}). Batch-1"
      f" latency {best['batch1_ms']:.2f} ms per prompt,"
      f" {best['batch1_speedup_vs_ar']:.2f}x Tunix's Sampler and"
      f" {loop['batch1_ms'] / best['batch1_ms']:.2f}x our AR loop.{extra} Batch"
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

  A row's answer (`answer_lengths` n, stop token excluded) occupies
  positions `P .. P + n - 1` (P: `prompt_lengths`), its stop token `P + n`;
  one forward per touched block is the best a block decoder can do, so
  `n / blocks` bounds its tokens per forward. Lengths are `[rows]`;
  `stopped` (`[rows]`, default all): whether a row ends with a stop token
  (one without touches only its answer's blocks).
  """
  p = np.asarray(prompt_lengths, np.int64)
  n = np.asarray(answer_lengths, np.int64)
  stop = np.ones_like(n, bool) if stopped is None else np.asarray(stopped)
  last = p + n - 1 + stop.astype(np.int64)  # The last position touched.
  blocks = last // block_size - p // block_size + 1
  return float(np.mean(n / np.maximum(blocks, 1)))
