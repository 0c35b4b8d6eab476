# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The decode benchmark's cells and table: speed beside its roofline.

Each cell is one method at one batch size of one workload: tokens/s, its
ratios to Tunix's `Sampler` (`ar`) and to our one-token AR loop
(`ar_loop`), tokens per forward and its fraction of the workload's TPF
ceiling, exact match, and, for a method of our decoding loop, the share of
its time its model forwards take, measured inside its compiled program
(`benchmarks.roofline.engine_seconds`), and the speed-up over the loop an
engine doing only its forwards would reach; on a chip whose HBM bandwidth
is known, the share of the HBM roofline (the bytes its forwards must read
over the bandwidth, `roofline.forward_bytes`). Both shares are at most 1.
A workload with a peer (`benchmarks.peer`) adds its setup and, per batch
size, its speed and tokens per forward beside `bd_cached` and how often its
tokens are ours.
"""

from __future__ import annotations

from typing import Any, Mapping

from benchmarks import chips
from benchmarks import roofline
import jax
import numpy as np
from tunix_bd.evaluation import speed
from tunix_bd.generate import canvas as canvas_lib


def cells(
    timings: Mapping[str, speed.Timing],
    *,
    correct: Mapping[str, list[bool]] | None,
    blocks: Mapping[str, int],
    cached: Mapping[str, bool],
    engine: Mapping[str, float],
    ceilings: Mapping[int, float],
    batch_size: int,
    hbm_seconds: Mapping[int, float] | None = None,
) -> dict[str, dict[str, Any]]:
  """Per-method figures of one batch size: speed, ratios, roofline, TPF.

  Args:
    timings: method -> its `speed.Timing`; must hold `ar` and `ar_loop`.
    correct: method -> per-row exact matches, or None (no answers).
    blocks: method -> its block size (1 for AR).
    cached: method -> whether it decodes with the KV cache (the HBM
      roofline is that of cached forwards; a cache-free method gets none).
    engine: method -> seconds of its decoding outside its model forwards
      (`roofline.engine_seconds`); a method without one is not split.
    ceilings: block size -> the workload's TPF ceiling.
    batch_size: rows per call.
    hbm_seconds: block size -> a cached forward's bytes over the HBM
      bandwidth (`forward_hbm_seconds`); None: no HBM roofline.
  """
  report = {}
  for method, timing in timings.items():
    size = blocks[method]
    hbm_share = forwards = None
    if cached[method] and hbm_seconds is not None:
      hbm_share = (
          roofline.forward_bound_seconds(
              timing.num_forwards, batch_size, hbm_seconds[size]
          )
          / timing.seconds
      )
    if method in engine:
      forwards = timing.seconds - engine[method]
    tokens = int(timing.num_tokens.sum())
    report[method] = {
        "tokens_per_s": timing.tokens_per_s,
        # Per row: returned tokens over the model forwards it needed.
        "tokens_per_forward": timing.tokens_per_forward,
        "exact_match": (
            None if correct is None else float(np.mean(correct[method]))
        ),
        "new_tokens": tokens,
        "block_size": size,
        # The share of its decoding time its model forwards take.
        "forward_share": (
            None if forwards is None else forwards / timing.seconds
        ),
        # Tokens over the forwards' time; None where they took none.
        "forward_bound_tokens_per_s": (
            tokens / forwards if forwards is not None and forwards > 0 else None
        ),
        # The HBM-bound time of its forwards over the measured time.
        "hbm_share": hbm_share,
        "tpf_ceiling": ceilings[size],
        "tpf_of_ceiling": (
            timing.tokens_per_forward / ceilings[size]
            if ceilings[size] > 0
            else None
        ),
    }
  rate = lambda m, key: max(report[m][key], 1e-9)
  loop = report["ar_loop"]["forward_bound_tokens_per_s"]
  for cell in report.values():
    cell["speedup_vs_ar"] = cell["tokens_per_s"] / rate("ar", "tokens_per_s")
    cell["speedup_vs_ar_loop"] = cell["tokens_per_s"] / rate(
        "ar_loop", "tokens_per_s"
    )
    bound = cell["forward_bound_tokens_per_s"]
    cell["ideal_vs_ar_loop"] = (
        None
        if bound is None or loop is None
        else bound / rate("ar_loop", "forward_bound_tokens_per_s")
    )
  return report


def forward_hbm_seconds(
    models: Mapping[int, Any],
    *,
    batch_size: int,
    max_prompt_length: int,
    max_new_tokens: int,
) -> dict[int, float] | None:
  """Block size -> a cached forward's bytes over this chip's HBM bandwidth.

  Each at the cache size our decoder uses for that block size and these
  lengths, the prompt's complete blocks already written; None where the
  bandwidth is not known (`chips.HBM_BYTES_PER_S`).
  """
  bandwidth = chips.hbm_bytes_per_s()
  if bandwidth is None:
    return None
  forwards = _forwards(models, batch_size, max_prompt_length, max_new_tokens)
  return {
      size: roofline.forward_bytes(f) / bandwidth
      for size, f in zip(models, forwards)
  }


def _forwards(models, batch_size, max_prompt_length, max_new_tokens):
  """Per model, its cached forward at our decoder's cache size."""
  forwards = []
  for size, model in models.items():
    layout = canvas_lib.Layout.create(size, max_prompt_length, max_new_tokens)
    forwards.append(
        roofline.Forward(
            model,
            batch_size=batch_size,
            width=size,
            cache_size=layout.length,
            context=min(layout.first * size, layout.length - size),
            block_size=size,
        )
    )
  return forwards


def _or_dash(value, spec=".2f") -> str:
  return "-" if value is None else format(value, spec)


def _peer_lines(name: str, result: Mapping[str, Any]) -> list[str]:
  """The peer's setup, and per batch size its speed and tokens vs ours."""
  peer = result.get("peer")
  if peer is None:
    return []
  lines = [
      f"  {name} peer: Fast-dLLM v2 `{peer['decoder']}` (block cache"
      f" {'on' if peer['use_block_cache'] else 'off'}, sub-block"
      f" {peer['small_block_size']}), torch {peer['torch']}, transformers"
      f" {peer['transformers']}, {peer['threads']} threads,"
      f" {peer['parameters'] / 1e6:.2f} M parameters; pipe and JSON"
      f" {peer['exchange_overhead']:.1%} of its time"
  ]
  for key, agree in result["peer_agreement"].items():
    cells = result["cells"][key]
    ours, theirs = cells["bd_cached"], cells["peer"]
    ratio = ours["tokens_per_s"] / max(theirs["tokens_per_s"], 1e-9)
    lines.append(
        f"  {name} {key}: bd_cached {ours['tokens_per_s']:.1f} tokens/s vs"
        f" peer {theirs['tokens_per_s']:.1f} (x{ratio:.2f}), tok/fwd"
        f" {ours['tokens_per_forward']:.2f} vs"
        f" {theirs['tokens_per_forward']:.2f}; the same tokens in"
        f" {agree['same_tokens']:.0%} of rows, agreeing prefix"
        f" {agree['common_prefix']:.0%} of ours"
    )
  return lines


def format_table(results: Mapping[str, Any], title: str) -> str:
  """The benchmark's results (`workloads` -> name -> cells) as text."""
  device = jax.devices()[0]
  bandwidth = chips.hbm_bytes_per_s(device)
  hbm = (
      f"hbm: share of the HBM roofline ({device.device_kind},"
      f" {bandwidth / 1e9:.0f} GB/s)"
      if bandwidth
      else f"hbm: - (no HBM bandwidth known for {device.device_kind!r})"
  )
  lines = [
      (
          f"{title}, {jax.device_count()} {device.platform}"
          " device(s). fwd: share of the time in model forwards (the"
          " decoding program timed with and without its model call); ideal:"
          " speed-up over ar_loop of an engine doing only its forwards;"
          f" {hbm}; ceil: tok/fwd over the workload's TPF ceiling"
      ),
      (
          f"  {'workload':<10}{'budget':>7}{'batch':>6}  {'method':<14}"
          f"{'tokens/s':>10}{'vs AR':>7}{'vs loop':>8}{'ideal':>7}"
          f"{'fwd':>6}{'hbm':>6}{'tok/fwd':>9}{'ceil':>6}"
          f"{'exact':>8}{'tokens':>8}"
      ),
  ]
  for name, result in results["workloads"].items():
    for key, cells in result["cells"].items():
      batch = key.split("=")[1]
      for method, c in cells.items():
        lines.append(
            f"  {name:<10}{result['max_new_tokens']:>7}{batch:>6}  "
            f"{method:<14}{c['tokens_per_s']:>10.1f}"
            f"{c['speedup_vs_ar']:>7.2f}{c['speedup_vs_ar_loop']:>8.2f}"
            f"{_or_dash(c['ideal_vs_ar_loop']):>7}"
            f"{_or_dash(c['forward_share'], '.0%'):>6}"
            f"{_or_dash(c.get('hbm_share'), '.0%'):>6}"
            f"{c['tokens_per_forward']:>9.2f}"
            f"{_or_dash(c['tpf_of_ceiling'], '.0%'):>6}"
            f"{_or_dash(c['exact_match'], '.1%'):>8}{c['new_tokens']:>8}"
        )
  for name, result in results["workloads"].items():
    size = result["block_size"]
    for key, costs in result["forward_seconds"].items():
      each = ", ".join(f"{m} {1e6 * c:.0f} us" for m, c in costs.items())
      lines.append(
          f"  {name} {key}: a forward in its decoding program: {each}; TPF"
          f" ceiling {result['tpf_ceiling'][size]:.2f} at block {size}"
      )
    lines.extend(_peer_lines(name, result))
    for key, r in result.get("replay", {}).items():
      lines.append(
          f"  {name} {key}: packed replay of a temperature-0.7 rollout"
          f" {r['replay_s']:.3f} s vs rollout {r['rollout_s']:.3f} s (ratio"
          f" {r['replay_over_rollout']:.2f})"
      )
  return "\n".join(lines)
