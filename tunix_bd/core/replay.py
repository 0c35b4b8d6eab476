# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Replay scoring: the log-probs of a recorded trace under a model.

Replay scores each recorded token on the canvas it was committed from
(DESIGN.md "Replay"), so the live, reference and old policies of RL, and
OPD's student, all score the very actions the rollout took. Under the
rollout's parameters it reproduces `trace.action_logp` (DESIGN invariant
6): both go through `diffusion_lm.log_probs` at `trace.temperature`.

Packed layout, at the rollout's cost: one forward over `[canvases ; clean
sequence]` per batch. The canvases are only those that occurred, one per
(block, step) of each row (`canvases.packed_canvases`), each a block long;
the clean sequence is the row's prompt and completion. Under
`masks.canvas_mask` each canvas sees exactly the clean earlier blocks and
itself, as the denoiser did, so the model processes about as many tokens as
the rollout's denoising forwards did, in one call instead of one per step.
"""

from __future__ import annotations

import dataclasses

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import canvases as canvases_lib
from tunix_bd.core import diffusion_lm
from tunix_bd.core import trace as trace_lib


def _validate(model, trace) -> trace_lib.Trace:
  if not isinstance(trace, trace_lib.Trace):
    raise ValueError(
        f"trace must be a tunix_bd.core.trace.Trace, got {type(trace).__name__}."
    )
  vocab = getattr(getattr(model, "config", None), "vocab_size", None)
  return trace.validate(vocab_size=vocab if isinstance(vocab, int) else None)


def _num_canvases(trace: trace_lib.Trace, num_canvases: int | None) -> int:
  """Static canvases per row: given, counted, or the most possible."""
  size, width = trace.bd.block_size, np.shape(trace.tokens)[1]
  most = canvases_lib.num_completion_blocks(size, width) * size
  concrete = not isinstance(trace.action_step, jax.core.Tracer)
  if num_canvases is None:
    return canvases_lib.count_canvases(trace) if concrete else most
  if isinstance(num_canvases, bool) or not isinstance(num_canvases, int):
    raise ValueError(f"num_canvases must be an int, got {num_canvases!r}.")
  if not 1 <= num_canvases <= most:
    raise ValueError(f"num_canvases must be in [1, {most}], got {num_canvases}.")
  if concrete and canvases_lib.count_canvases(trace) > num_canvases:
    raise ValueError(
        f"num_canvases={num_canvases} is too small: a row of the trace has"
        f" {canvases_lib.count_canvases(trace)} (block, step) canvases."
    )
  return num_canvases


def _replay(model, trace, num_canvases, logits_fn):
  """The packed replay of a validated trace; see `replay_log_probs`."""
  rows = canvases_lib.sequence(trace)
  packed = canvases_lib.packed_canvases(trace, num_canvases)
  config = dataclasses.replace(trace.bd, layout=bd_config.CLEAN_CONTEXT)
  logits = logits_fn(
      model,
      packed.tokens,
      packed.positions,
      packed.segment_ids,
      config=config,
      clean_tokens=rows.tokens,
      clean_positions=rows.positions,
      clean_segment_ids=rows.segment_ids,
      canvas_ids=packed.canvas_ids,
  )
  logp = diffusion_lm.token_log_probs(logits, packed.targets, trace.temperature)
  batch = logp.shape[0]
  out = jnp.zeros(np.shape(trace.tokens), jnp.float32)
  row = jnp.broadcast_to(jnp.arange(batch)[:, None], logp.shape)
  # Each completion slot is scored in exactly one canvas.
  return out.at[row, packed.slot].add(jnp.where(packed.scored, logp, 0.0))


def replay_log_probs(
    model,
    trace: trace_lib.Trace,
    *,
    logits_fn: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
    num_canvases: int | None = None,
) -> jax.Array:
  """Log-probs of a trace's actions under `model`, in one packed forward.

  Differentiable in the model's parameters and usable under `jax.jit` /
  `nnx.jit` (the trace's arrays traced; `bd` and `temperature` are static
  fields) and `jax.grad` / `nnx.value_and_grad`.

  Args:
    model: the model `logits_fn` calls (a Tunix decoder by default).
    trace: the recorded rollout; scored at `trace.temperature` with
      `trace.bd` (any `layout`: replay always packs canvases against a clean
      context).
    logits_fn: the cache-free model call.
    num_canvases: static (block, step) canvases per row, at least the most
      any row has; None counts them on a concrete trace and takes the most
      possible under jit.

  Returns:
    float32 `[batch, completion_len]` log-probs of `trace.tokens` at their
    commit steps; 0 where `action_step == -1`.

  Raises:
    ValueError: as `Trace.validate` (and for ids outside the model
      vocabulary), or for a bad `num_canvases`.
  """
  trace = _validate(model, trace)
  return _replay(model, trace, _num_canvases(trace, num_canvases), logits_fn)


def _replay_graph(graphdef, state, trace, *, num_canvases, logits_fn):
  return _replay(nnx.merge(graphdef, state), trace, num_canvases, logits_fn)


_replay_graph_jit = jax.jit(
    _replay_graph, static_argnames=("num_canvases", "logits_fn")
)


def _round_up(value: int, unit: int, most: int) -> int:
  """`unit` times a power of two >= value, at most `most`."""
  width = unit
  while width < value:
    width *= 2
  return min(width, most)


def compiled_replay_log_probs(
    model: nnx.Module,
    trace: trace_lib.Trace,
    *,
    logits_fn: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
) -> jax.Array:
  """`replay_log_probs` for eager callers, through a cached compiled program.

  Validates the concrete trace, trims completion columns never generated
  and rounds the canvas count and the width up to powers of two, so
  rollouts of similar lengths share one program (per model graph, batch,
  settings and temperature). For verification and evaluation outside a
  jitted step; inside one, call `replay_log_probs`.

  Args:
    model: a Tunix decoder `nnx.Module`.
    trace: the recorded rollout, with concrete arrays.
    logits_fn: as for `replay_log_probs`.

  Returns:
    float32 `[batch, completion_len]`, as `replay_log_probs`.

  Raises:
    ValueError: as `replay_log_probs`, and for a model that is not an
      `nnx.Module`.
  """
  if not isinstance(model, nnx.Module):
    raise ValueError(
        f"model must be an nnx.Module, got {type(model).__name__}; call"
        " replay_log_probs instead."
    )
  trace = _validate(model, trace)
  size = trace.bd.block_size
  steps = np.asarray(trace.action_step)
  generated = np.flatnonzero((steps >= 0).any(axis=0))
  needed = int(generated[-1]) + 1 if generated.size else 1
  width = _round_up(needed, size, steps.shape[1])
  trimmed = trace.replace(
      tokens=np.asarray(trace.tokens)[:, :width],
      action_step=steps[:, :width],
      action_logp=np.asarray(trace.action_logp)[:, :width],
      bd=dataclasses.replace(trace.bd, layout=bd_config.CLEAN_CONTEXT),
  )
  most = canvases_lib.num_completion_blocks(size, width) * size
  count = _round_up(canvases_lib.count_canvases(trimmed), 1, most)
  graphdef, state = nnx.split(model)
  scores = _replay_graph_jit(
      graphdef, state, trimmed, num_canvases=count, logits_fn=logits_fn
  )
  return jnp.pad(scores, ((0, 0), (0, steps.shape[1] - width)))


def max_replay_error(
    model,
    trace: trace_lib.Trace,
    *,
    logits_fn: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
) -> float:
  """Max |replayed - recorded| log-prob over the generated positions.

  Replay under the rollout's own parameters must give ~0 (DESIGN.md
  invariant 6); `generate.py --config.verify_replay=True` reports this. An
  `nnx.Module` is replayed by `compiled_replay_log_probs`.

  Returns:
    The max absolute difference, 0.0 if no position was generated.

  Raises:
    ValueError: as `replay_log_probs`.
  """
  if isinstance(model, nnx.Module):
    replayed = compiled_replay_log_probs(model, trace, logits_fn=logits_fn)
  else:
    replayed = replay_log_probs(model, trace, logits_fn=logits_fn)
  steps = np.asarray(trace.action_step)
  recorded = np.asarray(trace.action_logp, np.float64)
  error = np.abs(np.asarray(replayed, np.float64) - recorded)[steps >= 0]
  return float(error.max()) if error.size else 0.0
