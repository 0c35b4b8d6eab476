# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Replay scoring: a recorded trace's rows and log-probs under a model.

Each recorded token is scored on the canvas it was committed from, packed
against the row's clean context (docs/design.md "Replay"): RL through
`replay_log_probs`, OPD through `replay_rows`.
`ReplayLogitsFn` and `diffusion_batch` are the same replay as Tunix's
`DiffusionLogitsFn` and prepared batch.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import cached_logits
from tunix_bd.core import canvases as canvases_lib
from tunix_bd.core import diffusion_lm
from tunix_bd.core import external_logits
from tunix_bd.core import lm_head
from tunix_bd.core import trace as trace_lib


def check_trace(model, trace) -> trace_lib.Trace:
  """`trace.validate()`, with the ids checked against `model`'s vocabulary."""
  if not isinstance(trace, trace_lib.Trace):
    raise ValueError(
        "trace must be a tunix_bd.core.trace.Trace, got"
        f" {type(trace).__name__}."
    )
  vocab = getattr(getattr(model, "config", None), "vocab_size", None)
  return trace.validate(vocab_size=vocab if isinstance(vocab, int) else None)


def _replay(model, trace, shape, cached_logits_fn, per_slot):
  """The packed replay of a trace, checked here.

  Args:
    shape: `(num_canvases, context_length)` as given to `replay_log_probs`.
    per_slot: `(rows [batch, width, ...] (`lm_head.Rows`), targets [batch,
      width], temperature) -> [batch, width, ...]`, what each scored canvas
      column contributes.

  Returns:
    `(values, split)`: `values` float32 `[batch, completion_len, ...]`,
    `per_slot` of each generated slot on its commit canvas (0 where
    `action_step == -1`); `split` (static, from the traced rows' structure)
    whether the call's rows came with their head split off.
  """
  trace = check_trace(model, trace)
  num_canvases = canvases_lib.static_num_canvases(trace, shape[0])
  context = canvases_lib.clean_context(
      trace, canvases_lib.static_context_length(trace, shape[1])
  )
  packed = canvases_lib.packed_canvases(trace, num_canvases)
  config = dataclasses.replace(trace.bd, layout=bd_config.SINGLE_CANVAS)
  batch, block = context.tokens.shape[0], config.block_size

  def score(rows_of, fields):
    """Each completion slot's `per_slot` from the canvas of `fields` it is
    scored on (0 elsewhere), and the head the call split off (or None)."""
    rows = rows_of(fields)
    values = per_slot(rows, fields.targets, temperature=trace.temperature)
    scored = fields.scored[(...,) + (None,) * (values.ndim - 2)]
    zeros = jnp.zeros(np.shape(trace.tokens) + values.shape[2:], jnp.float32)
    row = jnp.broadcast_to(jnp.arange(batch)[:, None], fields.slot.shape)
    # Each completion slot is scored in exactly one canvas.
    return (
        zeros.at[row, fields.slot].add(jnp.where(scored, values, 0.0)),
        rows.head,
    )

  if isinstance(cached_logits_fn, external_logits.CacheFree):
    width = block
    rows_of = _cache_free_rows(model, cached_logits_fn, context, config)
  else:
    width = canvases_lib.canvases_per_forward(block, num_canvases) * block
    cache = block_cache.init_block_cache(
        model, batch, context.tokens.shape[1] + width, block_end_rows_of=block
    )

    def cached_rows(cache, fields, clean=None):
      """The rows of packed canvases against `cache`, after the clean
      context's columns (canvas id 0) where `clean` is given."""
      columns = (fields.tokens, fields.positions, fields.segment_ids)
      ids = fields.canvas_ids
      if clean is not None:
        before = (clean.tokens, clean.positions, clean.segment_ids)
        columns = [jnp.concatenate(x, axis=1) for x in zip(before, columns)]
        ids = jnp.concatenate([jnp.zeros_like(clean.tokens), ids], axis=1)
      rows, _ = cached_logits_fn(
          model, *columns, cache, config=config, canvas_ids=ids
      )
      return lm_head.as_rows(rows).map(lambda x: x[:, -width:])

    if width == num_canvases * block:
      # One group (RL's short answers): context and canvases in one forward.
      one_forward = functools.partial(cached_rows, cache, clean=context)
      values, head = score(one_forward, packed)
      return values, head is not None
    # One forward writes the clean context (and its block ends' raw rows,
    # the predictors of the next blocks' first tokens) to the cache.
    _, cache = cached_logits_fn(
        model,
        context.tokens,
        context.positions,
        context.segment_ids,
        cache,
        config=config,
    )
    rows_of = functools.partial(cached_rows, cache)
  # Rematerialized in the backward pass: gradient memory of one group.
  group = jax.checkpoint(functools.partial(score, rows_of), prevent_cse=False)
  groups = jax.tree.map(
      lambda x: jnp.moveaxis(x.reshape(batch, -1, width), 1, 0), packed
  )
  # The head's structure (None or not) is static: traced shapes suffice.
  out, head = jax.eval_shape(group, jax.tree.map(lambda x: x[0], groups))
  zeros = jnp.zeros(out.shape, out.dtype)
  values = lambda fields: group(fields)[0]

  def body(total, fields):
    # Groups past every row's last canvas are skipped at run time.
    occupied = fields.segment_ids.any()
    return total + jax.lax.cond(occupied, values, lambda _: zeros, fields), None

  total, _ = jax.lax.scan(body, zeros, groups)
  return total, head is not None


def _cache_free_rows(model, fn, context, config):
  """`rows_of(fields)` of one packed canvas through `fn`, an
  `external_logits.CacheFree`: one forward of its own.

  The canvas is scored on a single canvas in logical order: the clean
  blocks before its block, its block, then pads; what the cached denoiser
  saw, and under block-causal attention (later blocks unseen) what the
  cache-free one saw. Returns its block's rows, `[batch, block_size, ...]`.
  """
  size = config.block_size
  batch = context.tokens.shape[0]
  # One block past the clean context: the last block's canvas.
  length = context.tokens.shape[1] + size
  position = jnp.arange(length, dtype=jnp.int32)
  position = jnp.broadcast_to(position, (batch, length))
  clean = [
      jnp.pad(x, ((0, 0), (0, size)))
      for x in (context.tokens, context.segment_ids)
  ]

  def rows_of(fields):
    start = jnp.max(fields.positions, axis=1, keepdims=True)
    start = start // size * size
    offset = position - start
    here, before = (offset >= 0) & (offset < size), offset < 0
    index = jnp.clip(offset, 0, size - 1)
    tokens, segments = (
        jnp.where(
            here,
            jnp.take_along_axis(x, index, axis=1),
            jnp.where(before, whole, 0),
        )
        for x, whole in zip((fields.tokens, fields.segment_ids), clean)
    )
    rows = lm_head.as_rows(
        fn.logits_fn(model, tokens, position, segments, config=config)
    )
    return rows.map(
        lambda x: jnp.take_along_axis(
            x, (start + jnp.arange(size))[:, :, None], axis=1
        )
    )

  return rows_of


def replay_log_probs(
    model,
    trace: trace_lib.Trace,
    *,
    cached_logits_fn: diffusion_lm.CachedRowsFn = (
        cached_logits.block_rows_with_cache
    ),
    num_canvases: int | None = None,
    context_length: int | None = None,
    logits_chunk: int | None = None,
) -> jax.Array:
  """Log-probs of a trace's actions under `model`, in one packed forward.

  Differentiable in the model's parameters and usable under `jax.jit` /
  `nnx.jit` (the trace's arrays traced; `bd` and `temperature` are static
  fields) and `jax.grad` / `nnx.value_and_grad`.

  Args:
    model: the model `cached_logits_fn` calls (a Tunix decoder by default).
    trace: the recorded rollout; scored at `trace.temperature` with
      `trace.bd` (any `layout`).
    cached_logits_fn: the cached model call, given the canvases with
      `canvas_ids` and the clean context before them (id 0) in the same
      call or in its cache; or an `external_logits.CacheFree` one, which
      scores each canvas in a forward of its own.
    num_canvases: static (block, step) canvases per row, at least the most
      any row has; None counts them on a concrete trace and takes the most
      possible under jit.
    context_length: static clean positions per row, at least the start of
      any row's last generated block (`canvases.context_length`); None
      counts them on a concrete trace and takes the whole sequence under
      jit.
    logits_chunk: None scores dense logits; an int scores the rows this
      many vocabulary columns at a time (`lm_head.token_stats`).

  Returns:
    float32 `[batch, completion_len]` log-probs of `trace.tokens` at their
    commit steps; 0 where `action_step == -1`.
  """
  chunk = lm_head.check_chunk(logits_chunk)

  def per_slot(rows, targets, temperature):
    return lm_head.token_stats(
        rows, targets, temperature=temperature, chunk=chunk
    )[0]

  return _replay(
      model, trace, (num_canvases, context_length), cached_logits_fn, per_slot
  )[0]


def replay_rows(
    model,
    trace: trace_lib.Trace,
    *,
    cached_logits_fn: diffusion_lm.CachedRowsFn = (
        cached_logits.block_rows_with_cache
    ),
    num_canvases: int | None = None,
    context_length: int | None = None,
) -> lm_head.Rows:
  """Each generated slot's target-aligned rows on its commit canvas.

  `lm_head.Rows` `[batch, completion_len, ...]`, float32 values, 0 where
  `action_step == -1`: `replay_log_probs`' forward keeping whole rows
  (the `scoring.log_probs` of their logits at `trace.temperature`, taken
  at `trace.tokens`, are `replay_log_probs`); `action_logp` and
  `temperature` are not read.
  """

  def values(rows, targets, temperature):
    del targets, temperature
    return rows.values.astype(jnp.float32)

  shape = (num_canvases, context_length)
  out, split = _replay(model, trace, shape, cached_logits_fn, values)
  # A call that splits its head off splits the model's own
  # (`lm_head.split_head`), here taken outside any trace.
  head = lm_head.split_head(model, trace.bd.mask_token_id) if split else None
  return lm_head.Rows(out, head)


def replay_logits(model, trace: trace_lib.Trace, **kwargs) -> jax.Array:
  """float32 `[batch, completion_len, vocab]`: the logits of `replay_rows`
  (same arguments), 0 where `action_step == -1`."""
  logits = lm_head.dense_logits(replay_rows(model, trace, **kwargs))
  generated = jnp.asarray(trace.action_step) >= 0
  return jnp.where(generated[..., None], logits, 0.0)


# The trace fields a prepared rollout carries as `model_inputs`; `bd` and
# `temperature` are settings of the scorer, not batch-major arrays.
TRACE_INPUTS = ("prompt_tokens", "prompt_lengths", "tokens", "action_step")


@dataclasses.dataclass(frozen=True)
class ReplayLogitsFn:
  """Replay as a Tunix `DiffusionLogitsFn` over prepared rollouts.

  `fn(model, model_inputs)` with the `TRACE_INPUTS` of a trace returns
  `replay_logits`: each completion slot's logits on its commit canvas,
  float32 `[batch, completion_len, vocab]`, aligned with `trace.tokens`
  (0 where never generated). Tunix applies the temperature
  (`compute_diffusion_per_token_logps`), so the rollout's own temperature
  reproduces `trace.action_logp`.
  """

  bd: bd_config.BlockDiffusionConfig
  cached_logits_fn: diffusion_lm.CachedRowsFn = (
      cached_logits.block_rows_with_cache
  )

  def __call__(self, model, model_inputs) -> jax.Array:
    trace = trace_lib.Trace(
        **{name: model_inputs[name] for name in TRACE_INPUTS},
        action_logp=jnp.zeros(jnp.shape(model_inputs["tokens"]), jnp.float32),
        bd=self.bd,
    )
    return replay_logits(model, trace, cached_logits_fn=self.cached_logits_fn)


def diffusion_batch(trace: trace_lib.Trace) -> object:
  """A trace as Tunix's prepared `DiffusionTokenBatch` (`ReplayLogitsFn`).

  Target ids are the trace's tokens, weighted 1 on every action (the
  post-stop slots of the stop block included) and 0 where never generated.
  """
  if compat.tunix_diffusion is None:
    raise ValueError("the installed Tunix has no tunix.diffusion contract.")
  steps = np.asarray(trace.action_step)
  return compat.tunix_diffusion.DiffusionTokenBatch.create(
      model_inputs={
          name: np.asarray(getattr(trace, name), np.int32)
          for name in TRACE_INPUTS
      },
      target_ids=np.asarray(trace.tokens, np.int32),
      loss_weights=(steps >= 0).astype(np.float32),
  )
