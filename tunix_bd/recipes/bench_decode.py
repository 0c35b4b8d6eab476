# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_decode`: AR vs block-diffusion decoding, side by side.

One run measures, on the same prompts: Tunix's stock KV-cached AR `Sampler`
on the AR teacher, and parallel block denoising of the converted model,
cache-free and with the exact block KV cache, at every (batch size,
generation budget) pair. Each cell reports tokens/s (returned tokens over
decoding time, compilation excluded), its ratio to AR, tokens per forward and
greedy exact match. It then times a stochastic rollout and the vectorized
replay of its traces.

The methods alternate batch by batch (AR, cache-free, cached, AR, ...), so a
shared, noisy machine slows all of them alike.
"""

from __future__ import annotations

import os
import time

import jax
import ml_collections
import numpy as np

from tunix_bd.data import chat
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.generate import replay
from tunix_bd.models import bd_config as bd_config_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import ar_eval
from tunix_bd.recipes import common

METHODS = ("ar", "bd_cache_free", "bd_cached")


def _ar_decoder(model, tokenizer, prompts, max_new_tokens):
  """A function decoding a batch of prompt strings with Tunix's Sampler."""
  width = max(len(tokenizer.encode(p)) for p in prompts)
  sampler = ar_eval.make_sampler(model, tokenizer, width + max_new_tokens)

  def decode(batch):
    out = sampler(
        batch,
        max_generation_steps=max_new_tokens,
        max_prompt_length=width,
        temperature=0.0,
        eos_tokens=[tokenizer.eos_token_id],
    )
    lengths = [len(t) for t in out.tokens]
    # One forward per generated position, the prefill included.
    return out.text, np.asarray(lengths), np.asarray(lengths) + 1

  return decode


def _bd_decoder(model, tokenizer, bd, max_new_tokens, width, use_cache):
  config = denoise.DenoiseConfig(
      max_new_tokens=max_new_tokens,
      max_prompt_length=width,
      stop_ids=(tokenizer.eos_token_id,),
      pad_id=tokenizer.pad_token_id,
      use_cache=use_cache,
  )

  def decode(batch):
    out = denoise.generate(model, batch, bd=bd, config=config)
    texts = [tokenizer.decode(c.tolist()) for c in out.completions]
    lengths = np.asarray([len(c) for c in out.completions])
    return texts, lengths, out.num_forwards

  return decode


def _measure(decoders, inputs, answers, batch_size):
  """Decodes every batch with each method in turn; returns per-method cells."""
  num_batches = len(inputs["ar"]) // batch_size
  cells = {
      m: {"seconds": 0.0, "tokens": 0, "tpf": [], "texts": []} for m in decoders
  }
  for method, decode in decoders.items():  # Compile outside the clock.
    decode(inputs[method][:batch_size])
  for b in range(num_batches):
    for method, decode in decoders.items():
      batch = inputs[method][b * batch_size : (b + 1) * batch_size]
      start = time.perf_counter()
      texts, lengths, forwards = decode(batch)
      cells[method]["seconds"] += time.perf_counter() - start
      cells[method]["tokens"] += int(lengths.sum())
      cells[method]["tpf"] += list(lengths / np.maximum(forwards, 1))
      cells[method]["texts"] += texts
  report = {}
  for method, cell in cells.items():
    n = len(cell["texts"])
    correct = [
        tasks_lib.exact_match(t, a) for t, a in zip(cell["texts"], answers[:n])
    ]
    report[method] = {
        "tokens_per_s": cell["tokens"] / max(cell["seconds"], 1e-9),
        # Per row: returned tokens over the model forwards it needed.
        "tokens_per_forward": float(np.mean(cell["tpf"])),
        "exact_match": float(np.mean(correct)),
        "new_tokens": cell["tokens"],
    }
  ar_rate = report["ar"]["tokens_per_s"]
  for cell in report.values():
    cell["speedup_vs_ar"] = cell["tokens_per_s"] / max(ar_rate, 1e-9)
  return report


def _replay_ratio(model, tokenizer, bd, prompts, batch_size, max_new_tokens):
  """Seconds of vectorized replay over seconds of the rollout it replays."""
  config = denoise.DenoiseConfig(
      max_new_tokens=max_new_tokens,
      max_prompt_length=max(len(p) for p in prompts),
      temperature=0.7,
      stop_ids=(tokenizer.eos_token_id,),
      pad_id=tokenizer.pad_token_id,
  )
  batch = prompts[:batch_size]
  seeds = np.arange(batch_size)
  out = denoise.generate(model, batch, bd=bd, config=config, seeds=seeds)
  jax.block_until_ready(
      replay.compiled_replay_log_probs(model, out.trace, bd=bd)
  )
  start = time.perf_counter()
  out = denoise.generate(model, batch, bd=bd, config=config, seeds=seeds)
  rollout = time.perf_counter() - start
  start = time.perf_counter()
  jax.block_until_ready(
      replay.compiled_replay_log_probs(model, out.trace, bd=bd)
  )
  replayed = time.perf_counter() - start
  return {
      "rollout_s": rollout,
      "replay_s": replayed,
      "replay_over_rollout": replayed / max(rollout, 1e-9),
  }


def run(config: ml_collections.ConfigDict) -> dict:
  """Prints the side-by-side table and returns it as a dict."""
  common.require_positive(config, "num_prompts")
  for path in (config.ar_checkpoint, config.bd_checkpoint):
    if not os.path.isdir(path):
      raise ValueError(
          f"{path!r} is not a checkpoint directory; run `ar_pretrain.py` and "
          "`sft.py` (or `quickstart.py`) first."
      )
  bd = bd_config_lib.load_settings(config.bd_checkpoint)
  tokenizer = tokenizer_lib.load_tokenizer(config.bd_checkpoint)
  mix = tasks_lib.TaskMix(tasks=tuple(config.tasks), seed=0)
  examples = mix.examples("eval", config.num_prompts)
  answers = [e.answer for e in examples]
  prompt_ids = [
      chat.encode_prompt(tokenizer, e.messages()[:1]) for e in examples
  ]
  prompt_texts = [tokenizer.decode(p) for p in prompt_ids]
  width = max(len(p) for p in prompt_ids)
  mesh = common.make_mesh(config.mesh)
  results = {"cells": {}}
  with mesh:
    ar_model, _ = hf_checkpoint.load_qwen3(config.ar_checkpoint, mesh=mesh)
    bd_model, _ = hf_checkpoint.load_qwen3(config.bd_checkpoint, mesh=mesh)
    for new_tokens in config.max_new_tokens:
      for batch_size in config.batch_sizes:
        if batch_size > len(examples):
          raise ValueError(
              f"batch size {batch_size} exceeds num_prompts={len(examples)}."
          )
        decoders = {
            "ar": _ar_decoder(ar_model, tokenizer, prompt_texts, new_tokens),
            "bd_cache_free": _bd_decoder(
                bd_model, tokenizer, bd, new_tokens, width, use_cache=False
            ),
            "bd_cached": _bd_decoder(
                bd_model, tokenizer, bd, new_tokens, width, use_cache=True
            ),
        }
        inputs = {
            "ar": prompt_texts,
            "bd_cache_free": prompt_ids,
            "bd_cached": prompt_ids,
        }
        key = f"new_tokens={new_tokens},batch={batch_size}"
        results["cells"][key] = _measure(decoders, inputs, answers, batch_size)
    results["replay"] = _replay_ratio(
        bd_model,
        tokenizer,
        bd,
        prompt_ids,
        max(config.batch_sizes),
        max(config.max_new_tokens),
    )
  lines = [
      (
          f"Decode benchmark: {len(examples)} eval prompts, block size "
          f"{bd.block_size}, threshold 0.9, {jax.device_count()} "
          f"{jax.devices()[0].platform} device(s)"
      ),
      (
          f"  {'budget':>7}{'batch':>6}  {'method':<14}{'tokens/s':>10}"
          f"{'vs AR':>7}{'tok/fwd':>9}{'exact':>8}{'tokens':>8}"
      ),
  ]
  for key, cells in results["cells"].items():
    budget, batch = (part.split("=")[1] for part in key.split(","))
    for method, c in cells.items():
      lines.append(
          f"  {budget:>7}{batch:>6}  {method:<14}{c['tokens_per_s']:>10.1f}"
          f"{c['speedup_vs_ar']:>7.2f}{c['tokens_per_forward']:>9.2f}"
          f"{c['exact_match']:>8.1%}{c['new_tokens']:>8}"
      )
  r = results["replay"]
  lines.append(
      f"  replay of a temperature-0.7 rollout: {r['replay_s']:.3f} s vs "
      f"rollout {r['rollout_s']:.3f} s (ratio {r['replay_over_rollout']:.2f})"
  )
  print("\n".join(lines))
  if config.output:
    common.write_json(config.output, results)
  return results
