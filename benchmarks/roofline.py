# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What a decoding engine could reach: its forwards' time and the HBM bound.

The share of a method's decoding time its model forwards take (`fwd`) is
measured inside its own compiled program: the same `Denoiser` runs with its
model call replaced by a model-free stand-in (`engine_decoders`: every
position is sure of one token, so each commit rule commits on its own
schedule and nothing but the model is left out), timed interleaved with the
real calls; the forwards' time is the difference (`engine_seconds`). The
engine's time is positive, so the share is at most 1 by construction, and
the forwards are timed as the decoder runs them (the fused cache writes,
the prefill, the program XLA compiled), not as a plain forward in a loop of
its own, which may compile faster or slower (`forward_seconds`, kept for
`tools/tpu`).

An engine doing nothing but its forwards would decode at the method's
tokens over its forwards' time; its speed-up over our AR loop doing the
same is the `ideal` one.

The HBM roofline bounds the same forwards by memory instead: one cached
forward at small batch must read every weight matrix and the whole KV cache
(`forward_bytes`), so it takes at least those bytes over the chip's HBM
bandwidth (`chips.HBM_BYTES_PER_S`, by device kind). A method's share of that
roofline, the HBM-bound time of its forwards over its measured time, cannot
exceed 1, whatever the engine.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Sequence

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import block_cache
from tunix_bd.core import masks
from tunix_bd.evaluation import speed

# Each timed call runs about this long, so timer and dispatch noise stay
# small against it.
_TARGET_SECONDS = 0.005


@functools.partial(
    jax.jit, static_argnames=("batch_size", "width", "cache_size", "block_size")
)
def _forward_loop(
    graphdef,
    state,
    context,
    forwards,
    *,
    batch_size,
    width,
    cache_size,
    block_size,
):
  """Runs `forwards` cached forwards of `width` tokens; returns the tokens."""
  model = nnx.merge(graphdef, state)
  cache = block_cache.init_block_cache(model, batch_size, cache_size)
  rows = lambda x: jnp.broadcast_to(x, (batch_size, width))
  base = rows(context + jnp.arange(width, dtype=jnp.int32))
  # The context's slots read as written; their values do not change a cost.
  slots = jnp.arange(cache_size, dtype=jnp.int32)
  kv_positions = jnp.broadcast_to(slots, (batch_size, cache_size))
  kv_segments = (kv_positions < context).astype(jnp.int32)

  def forward(_, tokens):
    # Data-dependent positions: the mask is rebuilt every forward.
    positions = jnp.where(tokens >= 0, base, base + 1)
    segments = jnp.ones_like(positions)
    keys = jax.lax.dynamic_update_slice(kv_positions, positions, (0, context))
    written = jax.lax.dynamic_update_slice(kv_segments, segments, (0, context))
    mask = masks.block_causal_mask(
        positions,
        keys,
        block_size,
        q_segment_ids=segments,
        kv_segment_ids=written,
    )
    logits, _ = model(tokens, positions, _at(cache.kv, context), mask)
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)

  tokens = jnp.zeros((batch_size, width), jnp.int32)
  return jax.lax.fori_loop(0, forwards, forward, tokens)


def _at(kv, end_index):
  """The model cache with every layer's write index at `end_index`."""
  return jax.tree_util.tree_map_with_path(
      lambda path, x: (
          jnp.full_like(x, end_index)
          if getattr(path[-1], "key", None) == "end_index"
          else x
      ),
      kv,
  )


@dataclasses.dataclass(frozen=True)
class Forward:
  """One cached forward to time.

  Attributes:
    model: a Tunix decoder (the families of `tunix_bd.core.families`).
    batch_size: rows.
    width: new tokens per row (1 for an AR step, a block for a denoising
      step).
    cache_size: KV cache slots (the decoder's canvas length: dense
      attention costs what the cache holds, written or not).
    context: slots already written; `context + width <= cache_size`.
    block_size: of the mask (1 for AR).
  """

  model: nnx.Module
  batch_size: int
  width: int
  cache_size: int
  context: int
  block_size: int

  def __post_init__(self):
    if self.context < 0 or self.context + self.width > self.cache_size:
      raise ValueError(
          f"context {self.context} + width {self.width} must fit cache_size"
          f" {self.cache_size}."
      )


def forward_bytes(f: Forward) -> int:
  """Bytes one cached forward must read from HBM, at the least.

  Every parameter as stored, except an input embedding table that is not
  also the output head (its lookup reads `width` rows of it), plus the
  whole KV cache (dense attention reads every slot, written or not).

  Args:
    f: the forward.
  """
  params = nnx.to_flat_state(nnx.state(f.model, nnx.Param))
  names = [".".join(str(k) for k in path) for path, _ in params]
  untied = any("lm_head" in n for n in names)
  weights = sum(
      leaf.get_value().nbytes
      for name, (_, leaf) in zip(names, params)
      if not (untied and "input_embedding" in name)
  )
  cache = jax.eval_shape(
      lambda: block_cache.init_block_cache(
          f.model, f.batch_size, f.cache_size
      ).kv
  )
  kv = sum(
      x.size * x.dtype.itemsize
      for x in jax.tree_util.tree_leaves(cache)
      if x.ndim >= 3  # Keys and values, not the write indices.
  )
  return int(weights + kv)


def forward_seconds(
    forwards: Sequence[Forward], *, repeats: int = 5
) -> list[float]:
  """Seconds of one of each forward, fixed per-call costs excluded.

  The forwards are timed in turn, `repeats` rounds over all of them, each
  keeping its fastest, so a busy moment slows every width alike and their
  ratios (what the ideal speed-up depends on) hold.

  Args:
    forwards: what to time.
    repeats: rounds.

  Returns:
    One cost per forward, in order.
  """
  runs = []
  for f in forwards:
    graphdef, state = nnx.split(f.model)
    run = functools.partial(
        _forward_loop,
        graphdef,
        state,
        jnp.int32(f.context),
        batch_size=f.batch_size,
        width=f.width,
        cache_size=f.cache_size,
        block_size=f.block_size,
    )
    jax.block_until_ready(run(jnp.int32(1)))  # Compiles (once: n is traced).
    start = time.perf_counter()
    jax.block_until_ready(run(jnp.int32(1)))
    one = max(time.perf_counter() - start, 1e-6)
    runs.append((run, int(np.clip(_TARGET_SECONDS / one, 2, 4096))))
  # best[i] = (fastest T(0), fastest T(n)) of forward i: T(0) is the fixed
  # cost of a call. The fastest of each is the undisturbed time.
  best = [[float("inf")] * 2 for _ in runs]
  for _ in range(repeats):
    for i, (run, n) in enumerate(runs):
      for j, count in enumerate((0, n)):
        start = time.perf_counter()
        jax.block_until_ready(run(jnp.int32(count)))
        best[i][j] = min(best[i][j], time.perf_counter() - start)
  costs = [
      max(many - fixed, 0.5 * many) / n
      for (fixed, many), (_, n) in zip(best, runs)
  ]
  return costs


def iterations(num_forwards: np.ndarray, batch_size: int) -> int:
  """Forwards of all batches: a batch runs as many as its slowest row.

  Args:
    num_forwards: `[rows]` forwards each row needed, rows in batch order.
    batch_size: rows per call (a lower bound where rows wait for each
      other between blocks).
  """
  forwards = np.asarray(num_forwards)
  return int(
      sum(
          forwards[i : i + batch_size].max()
          for i in range(0, len(forwards), batch_size)
      )
  )


def forward_bound_seconds(
    num_forwards: np.ndarray, batch_size: int, seconds_per_forward: float
) -> float:
  """Seconds a decoder would take doing only its forwards.

  Args:
    num_forwards: `[rows]` forwards each row needed, rows in batch order.
    batch_size: rows per call (`iterations`).
    seconds_per_forward: the cost of one forward at that batch size.
  """
  return iterations(num_forwards, batch_size) * seconds_per_forward


@dataclasses.dataclass(frozen=True)
class _ModelFree:
  """A cached model call without the model: every position sure of `token`.

  Frozen, so the decoding program takes it as a static argument.
  """

  token: int

  def __call__(self, model, tokens, positions, segments, cache, **kwargs):
    del positions, segments, kwargs
    # Tokens are >= 0: the logits depend on them, so XLA computes the
    # engine's work on them each step, as on a model's.
    token = self.token + jnp.minimum(tokens, 0)
    sure = token[..., None] == jnp.arange(model.config.vocab_size)
    return jnp.where(sure, 0.0, -1e9).astype(jnp.float32), cache


def engine_decoders(
    model: nnx.Module, tokenizer, *, bd, config
) -> tuple[speed.Decoder, speed.Decoder | None]:
  """A cached denoiser's decoding program without its model call.

  Args:
    model: the denoiser's model (its shapes; no forward runs).
    tokenizer: its tokenizer.
    bd: its `BlockDiffusionConfig`.
    config: its cached `DenoiseConfig`.

  Returns:
    `(runs, stops)`: the denoiser of `config` with `_ModelFree` as its model
    call, whose rows decode the whole budget (`runs`) or stop after their
    first block (`stops`; None without stop ids), with as many stop ids as
    `config` (the same compiled program).
  """
  specials = (bd.mask_token_id, config.pad_id)
  n = len(config.stop_ids)
  ids = [i for i in range(n + 3) if i not in specials][: n + 1]
  calls = dict(cached_logits_fn=_ModelFree(ids[0]))

  def twin(stop_ids):
    # No model call: nothing to scan.
    settings = dataclasses.replace(
        config, stop_ids=tuple(stop_ids), scan_layers=False
    )
    return speed.denoiser_decoder(
        model, tokenizer, bd=bd, config=settings, **calls
    )

  return twin(ids[1:]), twin(ids[:1] + ids[2:]) if n else None


def engine_seconds(
    timing: speed.Timing,
    twins: tuple[speed.Timing, speed.Timing | None],
    batch_size: int,
) -> float:
  """Seconds of a method's decoding spent outside its model forwards.

  Its model-free twins (`engine_decoders`) ran the same calls; a commit
  rule's steps depend on the logits, so the method's loop may iterate more
  or less often than theirs. Their times, over their iterations, give the
  engine's fixed cost and its cost per iteration (at least 0), which are
  taken at the method's iterations; with the twins' iterations (a fixed
  schedule with no stop ids) that is the twin's time itself. It is
  positive: no method's loop iterates less often than the stopping twin's,
  whose rows commit their first block at once and stop.

  Args:
    timing: the method's, from `speed.measure`.
    twins: `(runs, stops)`, the timings of its twins' decoders.
    batch_size: rows per call.
  """
  runs, stops = twins
  count = iterations(timing.num_forwards, batch_size)
  counts = iterations(runs.num_forwards, batch_size)
  if stops is None or count == counts:
    return runs.seconds
  fewest = iterations(stops.num_forwards, batch_size)
  per_iteration = max(runs.seconds - stops.seconds, 0.0) / max(
      counts - fewest, 1
  )
  return runs.seconds + per_iteration * (count - counts)
