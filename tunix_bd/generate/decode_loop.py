# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The compiled block-denoising loop behind `denoise.Denoiser`.

One program runs all of decoding, each iteration one model forward and one
`step.denoise_step` of the current block (docs/design.md "Denoising step",
"KV cache"). Shapes depend only on the `canvas.Layout` and the batch size;
the rule, its parameters and the temperature are traced.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax
from flax import nnx
import jax
import jax.numpy as jnp
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import block_cache
from tunix_bd.core import cached_logits
from tunix_bd.core import diffusion_lm
from tunix_bd.core import layer_scan
from tunix_bd.core import lm_head
from tunix_bd.core import rng
from tunix_bd.generate import canvas as canvas_lib
from tunix_bd.generate import step as step_lib


@flax.struct.dataclass
class Carry:
  """The while-loop state.

  Attributes:
    j: int32 loop block (the j-th block each row denoises).
    s: int32 step within it.
    fuse: bool, this forward also writes the previous block (or the prompt)
      to the cache.
    done: bool, decoding is over.
    iteration: int32 forwards so far.
    canvas: int32 `[batch, length]` physical canvas.
    steps_at: int32 `[batch, length]` commit steps, -1 if never.
    logp_at: float32 `[batch, length]` recorded log-probs.
    stopped: bool `[batch]` rows past their stop block.
    num_steps: int32 `[batch]` steps (= forwards) each row needed.
    nonfinite: bool `[batch]` rows that met a non-finite logit.
    cache: the `BlockCache` (None cache-free).
  """

  j: jax.Array
  s: jax.Array
  fuse: jax.Array
  done: jax.Array
  iteration: jax.Array
  canvas: jax.Array
  steps_at: jax.Array
  logp_at: jax.Array
  stopped: jax.Array
  num_steps: jax.Array
  nonfinite: jax.Array
  cache: Any


def block_slice(
    x: jax.Array, layout: canvas_lib.Layout, j: jax.Array
) -> jax.Array:
  """Columns of loop block j of a physical `[batch, length]` array."""
  start = (layout.first + j) * layout.block_size
  return jax.lax.dynamic_slice_in_dim(x, start, layout.block_size, axis=1)


def put_block(x, layout: canvas_lib.Layout, j, value) -> jax.Array:
  """`x` with `value` written at the columns of loop block j."""
  start = (layout.first + j) * layout.block_size
  return jax.lax.dynamic_update_slice_in_dim(x, value, start, axis=1)


def _logits(rows, take=lambda x: x) -> jax.Array:
  """Dense logits of the columns `take` keeps of a model call's rows."""
  return lm_head.dense_logits(lm_head.as_rows(rows).map(take))


def model_calls(model, inputs, *, bd, layout, fns, use_cache):
  """The loop's model calls, each `carry -> (logits [batch, block, vocab]
  of loop block j, cache)`.

  Cache-free, `"step"` only: one forward over the whole canvas. Cached:
  `"step"` against the cache; `"write_previous"` (a block's first step
  after the first) one forward over the clean block before and block j's
  canvas, committing the clean block; `"prefill"` (the first step, when the
  loop starts past block 0) the same over the prompt's complete blocks.
  Only the calls this geometry can make are built: a one-block canvas has
  no block j - 1 to write, a loop from block 0 no prompt to prefill.
  """
  logits_fn, cached_logits_fn = fns
  size = layout.block_size
  positions, segments = inputs["positions"], inputs["segments"]
  if not use_cache:

    def cache_free(carry):
      rows = logits_fn(model, carry.canvas, positions, segments, config=bd)
      return _logits(rows, lambda x: block_slice(x, layout, carry.j)), None

    return {"step": cache_free}

  def plain_step(carry):
    here = lambda x: block_slice(x, layout, carry.j)
    rows, _ = cached_logits_fn(
        model,
        here(carry.canvas),
        here(positions),
        here(segments),
        carry.cache,
        config=bd,
    )
    return _logits(rows), carry.cache

  def fused_step(first, width):
    # Physical blocks [first(j), first(j) + width): the clean blocks to
    # commit, then block j's canvas.
    def call(carry):
      chunk = lambda x: jax.lax.dynamic_slice_in_dim(
          x, first(carry.j) * size, width * size, axis=1
      )
      rows, kept = cached_logits_fn(
          model,
          chunk(carry.canvas),
          chunk(positions),
          chunk(segments),
          carry.cache,
          config=bd,
          commit_length=(width - 1) * size,
      )
      return _logits(rows, lambda x: x[:, -size:]), kept

    return call

  calls = {"step": plain_step}
  if layout.blocks > 1:
    calls["write_previous"] = fused_step(lambda j: layout.first + j - 1, 2)
  if layout.first:
    calls["prefill"] = fused_step(lambda j: 0, layout.first + 1)
  return calls


@functools.partial(
    jax.jit,
    static_argnames=(
        "bd",
        "layout",
        "use_cache",
        "scan_layers",
        "logits_fn",
        "cached_logits_fn",
    ),
)
def decode(
    graphdef,
    state,
    packed_inputs: jax.Array,
    params: step_lib.CommitParams,
    stop_ids: jax.Array,
    *,
    bd: bd_config_lib.BlockDiffusionConfig,
    layout: canvas_lib.Layout,
    use_cache: bool,
    scan_layers: bool = False,
    logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
    cached_logits_fn: diffusion_lm.CachedRowsFn = (
        cached_logits.block_rows_with_cache
    ),
) -> dict[str, jax.Array]:
  """Denoises a batch; see `denoise.Denoiser` for the semantics.

  Args:
    graphdef, state: the model's `nnx.split`.
    packed_inputs: int32 `[batch, 4 * length + 3]`, the canvas and the
      per-row RNG seeds (`pack_inputs`).
    params: the commit rule, its parameters and the temperature (traced).
    stop_ids: int32 `[num_stop_ids]` ids that stop a row.
    bd, layout, use_cache, scan_layers, logits_fn, cached_logits_fn: as
      the `Denoiser` holds them (static).

  Returns:
    int32 `[batch, 3 * length + 2]`, read by `unpack_outputs`: physical
    `[batch, length]` `canvas`, `steps_at` (-1 if never committed) and
    `logp_at`; per-row `num_steps` and `nonfinite`.
  """
  model = nnx.merge(graphdef, state)
  if scan_layers:
    # Its layers stacked here, once, not in every forward of the loop.
    model = layer_scan.scanned(model)
  inputs, seeds = canvas_lib.unpack_inputs(packed_inputs, layout.length)
  completion = inputs["completion"]
  first_block, num_blocks = inputs["first_block"], inputs["num_blocks"]
  batch, length = inputs["tokens"].shape
  bd = dataclasses.replace(bd, layout=bd_config_lib.SINGLE_CANVAS)
  keys = rng.keys(seeds)
  calls = model_calls(
      model,
      inputs,
      bd=bd,
      layout=layout,
      fns=(logits_fn, cached_logits_fn),
      use_cache=use_cache,
  )

  def body(carry: Carry, call) -> Carry:
    j, s = carry.j, carry.s
    with jax.named_scope("model_call"):  # Names its ops in profiles.
      logits, cache = call(carry)
    here = lambda x: block_slice(x, layout, j)
    blk_completion = here(completion)
    active = ~carry.stopped & (j < num_blocks)
    eligible = blk_completion & (here(carry.steps_at) < 0) & active[:, None]
    out = step_lib.denoise_step(
        logits,
        here(carry.canvas),
        here(carry.steps_at),
        here(carry.logp_at),
        eligible,
        params,
        step_lib.step_keys(keys, first_block + j, s),
        s,
    )
    stepped = eligible.any(axis=-1)
    nonfinite = (eligible & ~jnp.isfinite(logits).all(axis=-1)).any(axis=-1)
    # Once no active row has a mask left in the block: stop the rows that
    # committed a stop token in it (`tunix_bd.core.eos`), then move on; the
    # cached path writes the finished block in the next block's first
    # forward.
    left = (blk_completion & (out.steps < 0) & active[:, None]).any()
    has_stop = (blk_completion & jnp.isin(out.tokens, stop_ids)).any(axis=-1)
    stopped = carry.stopped | (~left & active & has_stop)
    continuing = (~stopped & (j + 1 < num_blocks)).any()
    advance = ~left & continuing
    return Carry(
        j=jnp.where(advance, j + 1, j),
        s=jnp.where(advance, 0, s + 1),
        fuse=use_cache & advance,
        done=~left & ~continuing,
        iteration=carry.iteration + 1,
        canvas=put_block(carry.canvas, layout, j, out.tokens),
        steps_at=put_block(carry.steps_at, layout, j, out.steps),
        logp_at=put_block(carry.logp_at, layout, j, out.logp),
        stopped=stopped,
        # A row needs this forward iff it steps; a fused cache write only
        # ever rides on a forward of a row that steps.
        num_steps=carry.num_steps + stepped.astype(jnp.int32),
        nonfinite=carry.nonfinite | nonfinite,
        cache=cache,
    )

  carry = Carry(
      j=jnp.int32(0),
      s=jnp.int32(0),
      fuse=jnp.bool_("prefill" in calls),
      done=jnp.bool_(False),
      iteration=jnp.int32(0),
      canvas=inputs["tokens"],
      steps_at=jnp.full((batch, length), -1, jnp.int32),
      logp_at=jnp.zeros((batch, length), jnp.float32),
      stopped=jnp.zeros((batch,), bool),
      num_steps=jnp.zeros((batch,), jnp.int32),
      nonfinite=jnp.zeros((batch,), bool),
      cache=(
          block_cache.init_block_cache(
              model, batch, length, scan_layers=scan_layers
          )
          if use_cache
          else None
      ),
  )
  # Forced progress: a block takes at most `size` steps; the bound only
  # guards against a bug (left masks fail after the loop).
  max_iterations = layout.blocks * layout.block_size
  going = lambda c: ~c.done & (c.iteration < max_iterations)
  step = functools.partial(body, call=calls["step"])
  # Each kind of forward runs unconditionally, in a loop body of its own,
  # never as a branch of a switch: on a TPU v5e the fused forward inside a
  # switch ran a third slower than the same forward in a loop body
  # (docs/results.md). Iterations run in the order one loop over a switch
  # would run them.
  if "prefill" in calls:
    # The first forward also prefills the prompt's complete blocks.
    carry = body(carry, calls["prefill"])
  if "write_previous" not in calls:
    # Cache-free, or one block: every other iteration is a plain step.
    return canvas_lib.pack_outputs(jax.lax.while_loop(going, step, carry))

  def steps(c):
    return jax.lax.while_loop(lambda c: going(c) & ~c.fuse, step, c)

  write_previous = functools.partial(body, call=calls["write_previous"])
  # A block's plain steps end where the next block's fused first step
  # (`fuse`) is due.
  carry = jax.lax.while_loop(
      going, lambda c: steps(write_previous(c)), steps(carry)
  )
  return canvas_lib.pack_outputs(carry)
