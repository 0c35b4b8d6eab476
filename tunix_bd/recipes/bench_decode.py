# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_decode`: AR vs block-diffusion decoding, side by side.

One run measures, on the same prompts of each workload (tasks and
generation budget): Tunix's stock KV-cached AR `Sampler` on the AR teacher;
the teacher again in our decoding loop with one-token blocks (exactly AR
decoding, so the gap to it is what parallel denoising saves); and parallel
block denoising of the converted model, cache-free and with the exact block
KV cache; at every batch size. Each cell reports tokens/s (returned tokens
over decoding time, compilation excluded), its ratio to Tunix's AR, tokens
per forward and greedy exact match. It then times a stochastic rollout and
the packed replay of its traces (replay time over rollout time).

The methods alternate batch by batch (AR, AR loop, cache-free, cached, AR,
...), so a shared, noisy machine slows all of them alike.
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
from tunix_bd.core import replay
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import ar_eval
from tunix_bd.recipes import common
from tunix_bd.recipes import generate

# `ar`: Tunix's Sampler on the AR teacher. `ar_loop`: the same teacher
# decoded by our loop with blocks of one token (exactly AR decoding), which
# separates what parallel denoising saves from what the implementation does.
METHODS = ("ar", "ar_loop", "bd_cache_free", "bd_cached")


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


def _bd_decoder(model, tokenizer, bd, max_new_tokens, width, threshold, cache):
  config = generate.denoise_config(
      tokenizer,
      width,
      max_new_tokens=max_new_tokens,
      threshold=threshold,
      use_cache=cache,
  )

  # Built once, as the AR `Sampler` is: calls pay for decoding alone.
  denoiser = denoise.Denoiser(model, bd=bd, config=config)

  def decode(batch):
    out = denoiser(batch)
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
  loop_rate = report["ar_loop"]["tokens_per_s"]
  for cell in report.values():
    cell["speedup_vs_ar"] = cell["tokens_per_s"] / max(ar_rate, 1e-9)
    cell["speedup_vs_ar_loop"] = cell["tokens_per_s"] / max(loop_rate, 1e-9)
  return report


def _replay_ratio(model, tokenizer, bd, prompts, batch_size, max_new_tokens):
  """Seconds of packed replay over seconds of the rollout it replays.

  Both compiled first, then the median of three timed calls each.
  """
  config = generate.denoise_config(
      tokenizer,
      max(len(p) for p in prompts),
      max_new_tokens=max_new_tokens,
      temperature=0.7,
  )
  batch = prompts[:batch_size]
  seeds = np.arange(batch_size)
  denoiser = denoise.Denoiser(model, bd=bd, config=config)
  replayer = replay.Replayer(model)
  trace = denoiser(batch, seeds=seeds).trace
  jax.block_until_ready(replayer(trace))
  rollout, replayed = [], []
  for _ in range(3):
    start = time.perf_counter()
    trace = denoiser(batch, seeds=seeds).trace
    rollout.append(time.perf_counter() - start)
    start = time.perf_counter()
    jax.block_until_ready(replayer(trace))
    replayed.append(time.perf_counter() - start)
  rollout_s, replay_s = float(np.median(rollout)), float(np.median(replayed))
  return {
      "rollout_s": rollout_s,
      "replay_s": replay_s,
      "replay_over_rollout": replay_s / max(rollout_s, 1e-9),
  }


def _workload(config, name, models):
  """Measures one workload (tasks and budget) at every batch size."""
  settings = config.workload_settings[name]
  bd = bd_config_lib.load_settings(settings.bd_checkpoint)
  tokenizer = tokenizer_lib.load_tokenizer(settings.bd_checkpoint)
  mix = tasks_lib.TaskMix(tasks=tuple(settings.tasks), seed=0)
  examples = mix.examples("eval", config.num_prompts)
  answers = [e.answer for e in examples]
  prompt_ids = [
      chat.encode_prompt(tokenizer, e.messages()[:1]) for e in examples
  ]
  prompt_texts = [tokenizer.decode(p) for p in prompt_ids]
  width = max(len(p) for p in prompt_ids)
  ar_model, bd_model = (
      models(settings.ar_checkpoint),
      models(settings.bd_checkpoint),
  )
  new_tokens = settings.max_new_tokens
  ar_as_bd = bd_config_lib.BlockDiffusionConfig.autoregressive(bd.mask_token_id)
  result = {"block_size": bd.block_size, "max_new_tokens": new_tokens}
  result["cells"] = {}
  for batch_size in config.batch_sizes:
    decoders = {
        "ar": _ar_decoder(ar_model, tokenizer, prompt_texts, new_tokens),
        "ar_loop": _bd_decoder(
            ar_model, tokenizer, ar_as_bd, new_tokens, width, 1.0, True
        ),
    }
    for method, cache in (("bd_cache_free", False), ("bd_cached", True)):
      decoders[method] = _bd_decoder(
          bd_model, tokenizer, bd, new_tokens, width, config.threshold, cache
      )
    inputs = {m: prompt_ids for m in METHODS}
    inputs["ar"] = prompt_texts
    result["cells"][f"batch={batch_size}"] = _measure(
        decoders, inputs, answers, batch_size
    )
  result["replay"] = {
      f"batch={b}": _replay_ratio(
          bd_model, tokenizer, bd, prompt_ids, b, new_tokens
      )
      for b in config.batch_sizes
  }
  return result


def _format(config, results) -> str:
  lines = [
      (
          f"Decode benchmark: {config.num_prompts} eval prompts per workload,"
          f" threshold {config.threshold}, {jax.device_count()}"
          f" {jax.devices()[0].platform} device(s)"
      ),
      (
          f"  {'workload':<9}{'budget':>7}{'batch':>6}  {'method':<14}"
          f"{'tokens/s':>10}{'vs AR':>7}{'vs loop':>8}{'tok/fwd':>9}"
          f"{'exact':>8}"
          f"{'tokens':>8}"
      ),
  ]
  for name, result in results["workloads"].items():
    for key, cells in result["cells"].items():
      batch = key.split("=")[1]
      for method, c in cells.items():
        lines.append(
            f"  {name:<9}{result['max_new_tokens']:>7}{batch:>6}  "
            f"{method:<14}{c['tokens_per_s']:>10.1f}"
            f"{c['speedup_vs_ar']:>7.2f}{c['speedup_vs_ar_loop']:>8.2f}"
            f"{c['tokens_per_forward']:>9.2f}"
            f"{c['exact_match']:>8.1%}{c['new_tokens']:>8}"
        )
  for name, result in results["workloads"].items():
    for key, r in result["replay"].items():
      lines.append(
          f"  {name} {key}: packed replay of a temperature-0.7 rollout"
          f" {r['replay_s']:.3f} s vs rollout {r['rollout_s']:.3f} s (ratio"
          f" {r['replay_over_rollout']:.2f})"
      )
  return "\n".join(lines)


def run(config: ml_collections.ConfigDict) -> dict:
  """Prints the side-by-side table and returns it as a dict."""
  common.require_positive(config, "num_prompts")
  sizes = config.batch_sizes
  if not sizes or not all(isinstance(b, int) and b >= 1 for b in sizes):
    raise ValueError(
        f"batch_sizes must be ints >= 1, got {config.batch_sizes}."
    )
  if max(config.batch_sizes) > config.num_prompts:
    raise ValueError(
        f"batch size {max(config.batch_sizes)} exceeds"
        f" num_prompts={config.num_prompts}."
    )
  if not 0 < config.threshold <= 1:
    raise ValueError(f"threshold must be in (0, 1], got {config.threshold}.")
  unknown = [w for w in config.workloads if w not in config.workload_settings]
  if not config.workloads or unknown:
    raise ValueError(
        "workloads must name entries of workload_settings"
        f" {sorted(config.workload_settings)}, got {config.workloads}."
    )
  for name in config.workloads:  # Every workload, before any compute.
    settings = config.workload_settings[name]
    common.require_positive(config, f"workload_settings.{name}.max_new_tokens")
    for path in (settings.ar_checkpoint, settings.bd_checkpoint):
      if not os.path.isdir(path):
        raise ValueError(
            f"workload_settings.{name}: {path!r} is not a checkpoint"
            " directory; run `quickstart.py` (short) or `quickstart.py:long`"
            " (long) first, or point it at your exports."
        )
  mesh = common.make_mesh(config.mesh)
  loaded = {}

  def models(path):
    if path not in loaded:
      loaded[path] = hf_checkpoint.load_qwen3(path, mesh=mesh)[0]
    return loaded[path]

  results = {"threshold": config.threshold, "workloads": {}}
  with mesh:
    for name in config.workloads:
      results["workloads"][name] = _workload(config, name, models)
  print(_format(config, results))
  if config.output:
    common.write_json(config.output, results)
  return results
