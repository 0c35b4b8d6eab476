# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""AR vs block diffusion on one prompt set: accuracy, latency, throughput.

Methods: Tunix's `Sampler` on the AR teacher (the reference); the teacher in
tunix_bd's decoding loop with one-token blocks (exactly AR decoding, which
separates what parallel denoising saves from what the implementation does);
and the converted model at each commit threshold. All greedy and cached.

Two speeds, each measured with the methods interleaved, each batch's
fastest of `repeats` passes (`speed.measure`): batch-1 latency (seconds
per prompt over the first `latency_prompts` prompts) and
batch-`batch_size` throughput (tokens/s over all prompts, which also gives
the exact match).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import scoring
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import speed
from tunix_bd.generate import settings as settings_lib

AR_SAMPLER = "AR (Tunix Sampler)"
AR_LOOP = "AR, one-token blocks"


def threshold_method(threshold: float) -> str:
  return f"BD threshold {threshold}"


def _decoders(ar_model, bd_model, tokenizer, bd, thresholds, width, budget):
  def denoiser(model, model_bd, threshold):
    config = settings_lib.denoise_config(
        tokenizer, width, max_new_tokens=budget, threshold=threshold
    )
    return speed.denoiser_decoder(model, tokenizer, bd=model_bd, config=config)

  decoders = {
      AR_SAMPLER: ar_sampler.greedy_decoder(
          ar_model, tokenizer, max_prompt_length=width, max_new_tokens=budget
      ),
      AR_LOOP: denoiser(
          ar_model,
          bd_config_lib.BlockDiffusionConfig.autoregressive(bd.mask_token_id),
          1.0,
      ),
  }
  for threshold in thresholds:
    decoders[threshold_method(threshold)] = denoiser(bd_model, bd, threshold)
  return decoders


def compare(
    ar_model: Any,
    bd_model: Any,
    tokenizer: Any,
    bd: bd_config_lib.BlockDiffusionConfig,
    records: Sequence[Mapping[str, Any]],
    *,
    thresholds: Sequence[float],
    max_new_tokens: int,
    batch_size: int,
    latency_prompts: int,
    repeats: int,
    chat_options: chat.ChatOptions = chat.ChatOptions(),
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
  """One row per method; ratios are against Tunix's `Sampler` (row 0).

  Args:
    ar_model: the AR model (Tunix Qwen3).
    bd_model: its block-diffusion conversion.
    tokenizer: their tokenizer.
    bd: the conversion's block-diffusion settings.
    records: the prompts, `{"messages", "answer", "task"}` each: the
      messages are rendered with the chat template as the prompt; the
      completion is scored against `answer` (`scoring.score_by_task`).
    thresholds: commit thresholds of the converted model.
    max_new_tokens: the completion budget of every method.
    batch_size: rows per batch of the throughput measurement.
    latency_prompts: the first prompts, timed at batch 1.
    repeats: interleaved passes; each batch counts its fastest.
    chat_options: how prompts are rendered (`data.enable_thinking`).
    log: where progress lines go.

  Returns:
    Rows with `method`, `threshold` (None for AR), `exact_match`,
    `tokens_per_forward`, `batch1_ms` (ms per prompt at batch 1),
    `batch1_speedup_vs_ar` (the Sampler's ms over this method's),
    `tokens_per_s` (at `batch_size`), `throughput_vs_ar` and, for block
    diffusion, `tpf_ceiling` (`tpf_ceiling` of the prompts at its
    block size).
  """
  ids = [
      chat.encode_prompt(tokenizer, r["messages"], chat_options)
      for r in records
  ]
  texts = [tokenizer.decode(p) for p in ids]
  width = max(len(p) for p in ids)
  decoders = _decoders(
      ar_model, bd_model, tokenizer, bd, thresholds, width, max_new_tokens
  )
  inputs = {m: ids for m in decoders}
  inputs[AR_SAMPLER] = texts
  log(
      f"  batch 1: {latency_prompts} prompts x {len(decoders)} methods x"
      f" {repeats} repeats"
  )
  latency = speed.measure(
      decoders,
      {m: rows[:latency_prompts] for m, rows in inputs.items()},
      batch_size=1,
      repeats=repeats,
  )
  log(
      f"  batch {batch_size}: {len(ids)} prompts x {len(decoders)} methods x"
      f" {repeats} repeats"
  )
  throughput = speed.measure(
      decoders, inputs, batch_size=batch_size, repeats=repeats
  )
  answers = [r["answer"] for r in records]
  tasks = [r["task"] for r in records]
  ar_latency = latency[AR_SAMPLER].seconds_per_row
  ar_rate = throughput[AR_SAMPLER].tokens_per_s
  thresholds_of = {threshold_method(t): t for t in thresholds}
  ceiling = tpf_ceiling(
      [len(p) for p in ids],
      [len(tokenizer.encode(a, add_special_tokens=False)) for a in answers],
      bd.block_size,
  )
  rows = []
  for method, timing in throughput.items():
    rows.append({
        "method": method,
        "threshold": thresholds_of.get(method),
        "exact_match": scoring.score_by_task(tasks, timing.texts, answers)[
            "all"
        ],
        "tokens_per_forward": timing.tokens_per_forward,
        "batch1_ms": 1e3 * latency[method].seconds_per_row,
        "batch1_speedup_vs_ar": ar_latency / latency[method].seconds_per_row,
        "tokens_per_s": timing.tokens_per_s,
        "throughput_vs_ar": timing.tokens_per_s / max(ar_rate, 1e-9),
        "tpf_ceiling": ceiling if method in thresholds_of else None,
    })
  return rows


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
  point = lambda r, label: dict(
      tokens_per_forward=r["tokens_per_forward"],
      exact_match=r["exact_match"],
      batch1_ms=r["batch1_ms"],
      label=label,
  )
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


def frontier_reference(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """Tunix's `Sampler` as a latency point of the frontier (`plot_frontier`)."""
  sampler = next(r for r in rows if r["method"] == AR_SAMPLER)
  return dict(
      batch1_ms=sampler["batch1_ms"],
      exact_match=sampler["exact_match"],
      label="AR teacher, Tunix Sampler",
  )


def headline(rows: Sequence[dict[str, Any]], batch_size: int) -> str:
  """The block-diffusion row to quote, at both speeds, and what it is for.

  It quotes the threshold fastest at batch 1 among those within one point
  of the AR teacher's exact match (the most accurate if none is).
  """
  by_method = {r["method"]: r for r in rows}
  sampler, loop = by_method[AR_SAMPLER], by_method[AR_LOOP]
  candidates = [r for r in rows if r["threshold"] is not None]
  close = [
      r for r in candidates if r["exact_match"] >= sampler["exact_match"] - 0.01
  ]
  if close:
    best = min(close, key=lambda r: r["batch1_ms"])
  else:
    best = max(candidates, key=lambda r: r["exact_match"])
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

  A row's answer occupies logical positions `P .. P + n - 1` and its stop
  token `P + n`; decoding each touched block in one forward is the best a
  block decoder can do, so `n / blocks` bounds its tokens per forward.

  Args:
    prompt_lengths: `[rows]` prompt tokens P.
    answer_lengths: `[rows]` returned tokens n (the stop token excluded).
    block_size: S.
    stopped: `[rows]` whether the row ends with a stop token (default: all);
      a row without one touches only its answer's blocks.

  Returns:
    The ceiling of the mean per-row tokens per forward.
  """
  p = np.asarray(prompt_lengths, np.int64)
  n = np.asarray(answer_lengths, np.int64)
  stop = np.ones_like(n, bool) if stopped is None else np.asarray(stopped)
  last = p + n - 1 + stop.astype(np.int64)  # The last position touched.
  blocks = last // block_size - p // block_size + 1
  return float(np.mean(n / np.maximum(blocks, 1)))
