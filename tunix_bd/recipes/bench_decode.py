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

Beside each measured speed it prints the roofline (`evaluation.roofline`):
the cost of one cached model forward over one token and over one block,
measured in the same run at the workload's batch and cache size, the
speed-up over our AR loop that an engine doing nothing but its forwards
would reach (`ideal`), the measured one over it (`eff`), the share of the
decoding time the forwards account for (`fwd`), and tokens per forward as a
fraction of the workload's ceiling (`ceil`).

A `kind="random"` workload (`evaluation.fixed_schedule`) needs no training:
a randomly initialised Qwen3 of a realistic size, decoded with exactly k
commits per step (TPF = k by construction) for each k.

The methods alternate batch by batch (AR, AR loop, cache-free, cached, AR,
...), so a shared, noisy machine slows all of them alike.

With a `peer` section (`benchmarking.peer`), a trained workload whose
block-diffusion checkpoint is a Fast-dLLM v2 directory gets one more
method, `peer`: Fast-dLLM v2's own decoder on the same weights, prompts,
block size and threshold, in a subprocess under its own interpreter, timed
in the same interleaved rounds; the table adds how often its tokens are
ours.
"""

from __future__ import annotations

import contextlib
import os
import time

import jax
import ml_collections
import numpy as np

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.benchmarking import ar_sampler
from tunix_bd.benchmarking import block_diffusion
from tunix_bd.benchmarking import decode_table
from tunix_bd.benchmarking import fixed_schedule
from tunix_bd.benchmarking import peer as peer_lib
from tunix_bd.benchmarking import roofline
from tunix_bd.benchmarking import speed
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import replayer
from tunix_bd.data import chat
from tunix_bd.data import scoring
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.evaluation import report
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import bd_formats
from tunix_bd.run import models as models_lib
from tunix_bd.run import workdir as workdir_lib

# `ar`: Tunix's Sampler on the AR teacher. `ar_loop`: the same teacher
# decoded by our loop with blocks of one token (exactly AR decoding), which
# separates what parallel denoising saves from what the implementation does.
METHODS = ("ar", "ar_loop", "bd_cache_free", "bd_cached")


def _replay_ratio(model, tokenizer, bd, prompts, batch_size, max_new_tokens):
  """Seconds of packed replay over seconds of the rollout it replays.

  Both compiled first, then the median of three timed calls each.
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


def _measure(
    config,
    decoders,
    inputs,
    *,
    blocks,
    models,
    cached,
    budget,
    lengths,
    answers=None,
    one_batch=False,
    check=None,
):
  """The TPF ceilings, and cells and forward costs of every batch size.

  `lengths` is `(prompt lengths, answer lengths, stopped or None)` for the
  ceilings (`roofline.tpf_ceiling`); see `decode_table.cells` for the rest.
  """
  prompts, answer_lengths, stopped = lengths
  ceilings = {
      size: roofline.tpf_ceiling(prompts, answer_lengths, size, stopped=stopped)
      for size in models
  }
  out = {"tpf_ceiling": ceilings, "cells": {}, "forward_seconds": {}}
  for batch_size in config.batch_sizes:
    rows = {m: x[:batch_size] if one_batch else x for m, x in inputs.items()}
    timings = speed.measure(
        decoders, rows, batch_size=batch_size, repeats=config.repeats
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
        repeats=config.repeats,
    )
    out["forward_seconds"][key] = costs
    out["cells"][key] = decode_table.cells(
        timings,
        correct=correct,
        blocks=blocks,
        cached=cached,
        costs=costs,
        ceilings=ceilings,
        batch_size=batch_size,
    )
  return out


def _workload(config, name, models, peer, stack):
  """Measures one workload (tasks and budget) at every batch size.

  `peer` (enabled `PeerSettings` or None) adds the peer method, its
  subprocess closed by `stack`.
  """
  settings = config.workload_settings[name]
  key = f"workload_settings.{name}.bd_checkpoint"
  bd = bd_formats.load_settings(settings.bd_checkpoint, key)
  tokenizer = bd_formats.load_tokenizer(settings.bd_checkpoint, key=key)
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

  def denoiser(model, model_bd, rule, cache):
    config = settings_lib.denoise_config(
        tokenizer, width, max_new_tokens=new_tokens, use_cache=cache, **rule
    )
    return block_diffusion.denoiser_decoder(
        model, tokenizer, bd=model_bd, config=config
    )

  decoders = {
      "ar": ar_sampler.greedy_decoder(
          ar_model,
          tokenizer,
          max_prompt_length=width,
          max_new_tokens=new_tokens,
      ),
      "ar_loop": denoiser(ar_model, ar_as_bd, dict(threshold=1.0), True),
      "bd_cache_free": denoiser(bd_model, bd, _rule(config), False),
      "bd_cached": denoiser(bd_model, bd, _rule(config), True),
  }
  blocks = {"ar": 1, "ar_loop": 1}
  blocks.update(bd_cache_free=bd.block_size, bd_cached=bd.block_size)
  cached = {m: m != "bd_cache_free" for m in METHODS}
  if peer is not None:
    runner = stack.enter_context(
        peer_lib.Peer(
            peer,
            settings.bd_checkpoint,
            block_size=bd.block_size,
            mask_id=bd.mask_token_id,
            threshold=config.threshold,
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
  inputs["ar"] = prompt_texts
  answer_lengths = [
      len(tokenizer.encode(a, add_special_tokens=False)) for a in answers
  ]
  lengths = [len(p) for p in prompt_ids]
  result.update(
      _measure(
          config,
          decoders,
          inputs,
          blocks=blocks,
          models={1: ar_model, bd.block_size: bd_model},
          cached=cached,
          budget=new_tokens,
          lengths=(lengths, answer_lengths, None),
          answers=answers,
      )
  )
  if peer is not None:
    result["peer"]["exchange_overhead"] = runner.exchange_overhead
  result["replay"] = {
      f"batch={b}": _replay_ratio(
          bd_model, tokenizer, bd, prompt_ids, b, new_tokens
      )
      for b in config.batch_sizes
  }
  return result


def _random_workload(config, name, mesh):
  """A random model decoded at k tokens per forward, for every k."""
  workload = fixed_schedule.FixedSchedule.from_section(
      config.workload_settings[name], f"workload_settings.{name}"
  )
  rows = max(config.batch_sizes)
  model, _, decoders, inputs = fixed_schedule.build(workload, rows, mesh)
  blocks = workload.block_sizes()
  size, budget = workload.block_size, workload.max_new_tokens
  lengths = fixed_schedule.prompt_lengths(inputs)
  result = {"block_size": size, "max_new_tokens": budget}
  result.update(
      _measure(
          config,
          decoders,
          inputs,
          blocks=blocks,
          models={1: model, size: model},
          cached={m: True for m in blocks},
          budget=budget,
          # No stop token: each row's answer is the whole budget.
          lengths=(lengths, [budget] * rows, [False] * rows),
          # One batch per size: every row decodes the whole budget alike.
          one_batch=True,
          check=lambda timings: fixed_schedule.check_schedule(
              timings, workload
          ),
      )
  )
  return result


def _rule(config) -> dict:
  """The trained workloads' commit rule and its parameter."""
  if config.rule == commit_rules.FACTOR:
    return dict(rule=config.rule, factor=config.factor)
  return dict(rule=config.rule, threshold=config.threshold)


def _rule_text(config) -> str:
  return " ".join(f"{v}" for v in _rule(config).values())


def _is_random(settings) -> bool:
  return settings.get("kind") == "random"


def run(config: ml_collections.ConfigDict) -> dict:
  """Prints the side-by-side table and returns it as a dict."""
  if config.output:
    workdir_lib.check_file(config.output, "output")
  config_utils.check_int("num_prompts", config.num_prompts, 1)
  config_utils.check_int("repeats", config.repeats, 1)
  sizes = config.batch_sizes
  if not sizes or not all(isinstance(b, int) and b >= 1 for b in sizes):
    raise ValueError(
        f"batch_sizes must be ints >= 1, got {config.batch_sizes}."
    )
  peer = peer_lib.from_section(config.peer)
  if max(config.batch_sizes) > config.num_prompts:
    raise ValueError(
        f"batch size {max(config.batch_sizes)} exceeds"
        f" num_prompts={config.num_prompts}."
    )
  try:
    denoise.DenoiseConfig(
        max_new_tokens=1, max_prompt_length=1, **_rule(config)
    )
  except ValueError as e:
    raise ValueError(f"rule, threshold, factor: {e}") from None
  unknown = [w for w in config.workloads if w not in config.workload_settings]
  if not config.workloads or unknown:
    raise ValueError(
        "workloads must name entries of workload_settings"
        f" {sorted(config.workload_settings)}, got {config.workloads}."
    )
  if peer.enabled and config.rule != commit_rules.THRESHOLD:
    raise ValueError(
        f"rule={config.rule!r}: the peer decodes by threshold; use"
        " rule='threshold' or set peer.python=''."
    )
  for name in config.workloads:  # Every workload, before any compute.
    settings = config.workload_settings[name]
    if _is_random(settings):
      if peer.enabled:
        raise ValueError(
            f"workloads: {name!r} is a random workload (a model built in"
            " memory), which the peer cannot load; run it without"
            " peer.python."
        )
      fixed_schedule.FixedSchedule.from_section(
          settings, f"workload_settings.{name}"
      )
      continue
    config_utils.check_int(
        f"workload_settings.{name}.max_new_tokens", settings.max_new_tokens, 1
    )
    for path in (settings.ar_checkpoint, settings.bd_checkpoint):
      if not os.path.isdir(path):
        raise ValueError(
            f"workload_settings.{name}: {path!r} is not a checkpoint"
            " directory; run `quickstart.py` (short) or `quickstart.py:long`"
            " (long) first, or point it at your exports."
        )
    if peer.enabled:
      peer_lib.check_checkpoint(
          peer,
          settings.bd_checkpoint,
          f"workload_settings.{name}.bd_checkpoint",
      )
  mesh = mesh_lib.from_section(config.mesh)
  loaded = {}

  def models(path):
    if path not in loaded:
      loaded[path] = models_lib.load_checkpoint(path, mesh)
    return loaded[path]

  results = {**_rule(config), "workloads": {}}
  with mesh_lib.tunix_context(mesh), contextlib.ExitStack() as stack:
    for name in config.workloads:
      results["workloads"][name] = (
          _random_workload(config, name, mesh)
          if _is_random(config.workload_settings[name])
          else _workload(
              config, name, models, peer if peer.enabled else None, stack
          )
      )
  print(
      decode_table.format_table(
          results,
          f"Decode benchmark: {config.num_prompts} eval prompts per trained"
          f" workload, rule {_rule_text(config)}",
      )
  )
  if config.output:
    report.write_json(config.output, results)
  return results
