# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""AR vs block-diffusion decoding of one trained workload, side by side.

On the eval prompts of the workload's tasks: Tunix's KV-cached `Sampler` on
the AR teacher (`ar`); the teacher again in our decoding loop with
one-token blocks (`ar_loop`: exactly AR decoding, so the gap to it is what
parallel denoising saves, the gap to `ar` what the implementation does);
parallel block denoising of the converted model, cache-free
(`bd_cache_free`) and with the exact block KV cache (`bd_cached`); and,
with a peer (`benchmarks.peer`), the reference decoder on the same
weights (`peer`); at every batch size (`batch_sweep`). Then the seconds of
the packed replay of a stochastic rollout's traces over the rollout's.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import jax
import numpy as np

from benchmarks import batch_sweep
from benchmarks import decode_bench_settings
from benchmarks import peer as peer_lib
from benchmarks import roofline
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import replayer
from tunix_bd.data import chat
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import speed
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import bd_formats

METHODS = ("ar", "ar_loop", "bd_cache_free", "bd_cached")


def replay_ratio(model, tokenizer, bd, prompts, batch_size, max_new_tokens):
  """Seconds of packed replay over seconds of the rollout it replays.

  The rollout samples (temperature 0.7) the first `batch_size` prompts.
  Both are compiled first, then the median of three timed calls each.
  """
  config = settings_lib.denoise_config(
      tokenizer,
      max(len(p) for p in prompts),
      max_new_tokens=max_new_tokens,
      temperature=0.7,
  )
  batch = prompts[:batch_size]
  seeds = np.arange(batch_size)
  denoiser = denoise.Denoiser(model, bd=bd, config=config)
  compiled = replayer.Replayer(model)
  trace = denoiser(batch, seeds=seeds).trace
  jax.block_until_ready(compiled(trace))
  rollout, replayed = [], []
  for _ in range(3):
    start = time.perf_counter()
    trace = denoiser(batch, seeds=seeds).trace
    rollout.append(time.perf_counter() - start)
    start = time.perf_counter()
    jax.block_until_ready(compiled(trace))
    replayed.append(time.perf_counter() - start)
  rollout_s, replay_s = float(np.median(rollout)), float(np.median(replayed))
  return {
      "rollout_s": rollout_s,
      "replay_s": replay_s,
      "replay_over_rollout": replay_s / max(rollout_s, 1e-9),
  }


def measure(
    workload: decode_bench_settings.TrainedWorkload,
    settings: decode_bench_settings.DecodeBenchSettings,
    *,
    key: str,
    models: Callable[[str], Any],
    peer: peer_lib.PeerSettings | None,
    stack: contextlib.ExitStack,
) -> dict[str, Any]:
  """Every method at every batch size, then the replay ratios.

  Args:
    workload: the checked workload.
    settings: the benchmark's own settings (prompts, batch sizes, rule).
    key: how errors name the workload (`workload_settings.NAME`).
    models: the loaded model of a checkpoint directory (loaded once).
    peer: the enabled peer settings, or None for no peer method.
    stack: closes the peer's subprocess.

  Returns:
    The workload's report entry (`decode_table.format_table`).
  """
  key = f"{key}.bd_checkpoint"
  bd = bd_formats.load_settings(workload.bd_checkpoint, key)
  tokenizer = bd_formats.load_tokenizer(workload.bd_checkpoint, key=key)
  mix = tasks_lib.TaskMix(tasks=workload.tasks, seed=0)
  examples = mix.examples("eval", settings.num_prompts)
  answers = [e.answer for e in examples]
  prompt_ids = [
      chat.encode_prompt(tokenizer, e.messages()[:1]) for e in examples
  ]
  width = max(len(p) for p in prompt_ids)
  ar_model, bd_model = (
      models(workload.ar_checkpoint),
      models(workload.bd_checkpoint),
  )
  new_tokens = workload.max_new_tokens
  ar_as_bd = bd_config_lib.BlockDiffusionConfig.autoregressive(bd.mask_token_id)
  result = {"block_size": bd.block_size, "max_new_tokens": new_tokens}

  engines = {}

  def denoiser(name, model, model_bd, rule, cache):
    config = settings_lib.denoise_config(
        tokenizer, width, max_new_tokens=new_tokens, use_cache=cache, **rule
    )
    if cache:  # Our forwards' share: the program without its model call.
      engines[name] = roofline.engine_decoders(
          model, tokenizer, bd=model_bd, config=config
      )
    return speed.denoiser_decoder(model, tokenizer, bd=model_bd, config=config)

  rule = settings.commit_rule()
  decoders = {
      "ar": ar_sampler.greedy_decoder(
          ar_model,
          tokenizer,
          max_prompt_length=width,
          max_new_tokens=new_tokens,
      ),
      "ar_loop": denoiser(
          "ar_loop", ar_model, ar_as_bd, dict(threshold=1.0), True
      ),
      "bd_cache_free": denoiser("bd_cache_free", bd_model, bd, rule, False),
      "bd_cached": denoiser("bd_cached", bd_model, bd, rule, True),
  }
  blocks = {"ar": 1, "ar_loop": 1}
  blocks.update(bd_cache_free=bd.block_size, bd_cached=bd.block_size)
  cached = {m: m != "bd_cache_free" for m in METHODS}
  if peer is not None:
    runner = stack.enter_context(
        peer_lib.Peer(
            peer,
            workload.bd_checkpoint,
            block_size=bd.block_size,
            mask_id=bd.mask_token_id,
            threshold=settings.threshold,
            max_new_tokens=new_tokens,
            stop_id=tokenizer.eos_token_id,
            key=key,
        )
    )
    decoders["peer"] = runner.decoder(tokenizer)
    blocks["peer"] = bd.block_size
    cached["peer"] = False  # Our roofline does not model their forwards.
    result["peer"] = runner.ready
  inputs = {m: prompt_ids for m in decoders}
  inputs["ar"] = [tokenizer.decode(p) for p in prompt_ids]
  answer_lengths = [
      len(tokenizer.encode(a, add_special_tokens=False)) for a in answers
  ]
  result.update(
      batch_sweep.measure(
          decoders,
          inputs,
          batch_sizes=settings.batch_sizes,
          repeats=settings.repeats,
          blocks=blocks,
          models={1: ar_model, bd.block_size: bd_model},
          cached=cached,
          engines=engines,
          budget=new_tokens,
          lengths=([len(p) for p in prompt_ids], answer_lengths, None),
          answers=answers,
      )
  )
  if peer is not None:
    result["peer"]["exchange_overhead"] = runner.exchange_overhead
  result["replay"] = {
      f"batch={b}": replay_ratio(
          bd_model, tokenizer, bd, prompt_ids, b, new_tokens
      )
      for b in settings.batch_sizes
  }
  return result
