# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""AR vs block diffusion on one prompt set: accuracy, latency, throughput.

Methods: Tunix's `Sampler` on the AR teacher (the reference); the teacher in
tunix_bd's decoding loop with one-token blocks (exactly AR decoding, which
separates what parallel denoising saves from what the implementation does);
and the converted model at each commit threshold. All greedy and cached.

Two speeds, each measured with the methods interleaved, each batch's
fastest of `repeats` passes (`speed.measure`): batch-1 latency (seconds per prompt over the first
`latency_prompts` prompts) and batch-`batch_size` throughput (tokens/s over
all prompts, which also gives the exact match).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import block_diffusion
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
    return block_diffusion.denoiser_decoder(
        model, tokenizer, bd=model_bd, config=config
    )

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
    examples: Sequence[tasks_lib.Example],
    *,
    thresholds: Sequence[float],
    max_new_tokens: int,
    batch_size: int,
    latency_prompts: int,
    repeats: int,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
  """One row per method; ratios are against Tunix's `Sampler` (row 0).

  Returns:
    Rows with `method`, `exact_match`, `tokens_per_forward`, `batch1_ms`
    (ms per prompt at batch 1), `batch1_speedup_vs_ar` (the Sampler's ms
    over this method's), `tokens_per_s` (at `batch_size`) and
    `throughput_vs_ar`.
  """
  ids = [chat.encode_prompt(tokenizer, e.messages()[:1]) for e in examples]
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
  answers = [e.answer for e in examples]
  tasks = [e.task for e in examples]
  ar_latency = latency[AR_SAMPLER].seconds_per_row
  ar_rate = throughput[AR_SAMPLER].tokens_per_s
  rows = []
  for method, timing in throughput.items():
    rows.append({
        "method": method,
        "exact_match": tasks_lib.score_by_task(tasks, timing.texts, answers)[
            "all"
        ],
        "tokens_per_forward": timing.tokens_per_forward,
        "batch1_ms": 1e3 * latency[method].seconds_per_row,
        "batch1_speedup_vs_ar": ar_latency / latency[method].seconds_per_row,
        "tokens_per_s": timing.tokens_per_s,
        "throughput_vs_ar": timing.tokens_per_s / max(ar_rate, 1e-9),
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
