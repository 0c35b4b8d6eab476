# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Compiled replay for eager callers: `Replayer` and the replay check.

`core.replay` is the differentiable packed replay, for use inside a jitted
step; this module compiles it once per model for callers holding concrete
traces (verification, evaluation, RL's old and reference policies), and
measures docs/design.md invariant 6 (`max_replay_error`).
"""

from __future__ import annotations

import dataclasses
import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import cached_logits
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import replay
from tunix_bd.core import trace as trace_lib


@functools.partial(
    jax.jit,
    static_argnames=(
        "num_canvases",
        "context_length",
        "cached_logits_fn",
        "logits_chunk",
    ),
)
def _replay_graph(graphdef, state, trace, **kwargs):
  return replay.replay_log_probs(nnx.merge(graphdef, state), trace, **kwargs)


class Replayer:
  """Compiled replay of one model for eager callers, reusable.

  Splits the model once, as `Denoiser` does (in-place weight updates are
  seen by the next call; a change of structure needs a new `Replayer`).
  Each call trims completion columns never generated and rounds the width
  and canvas count up, so rollouts of similar lengths share one program.
  """

  def __init__(
      self,
      model: nnx.Module,
      *,
      cached_logits_fn: diffusion_lm.CachedRowsFn = (
          cached_logits.block_rows_with_cache
      ),
      logits_chunk: int | None = None,
  ):
    """Splits the model; the keywords are `replay.replay_log_probs`'."""
    if not isinstance(model, nnx.Module):
      raise ValueError(
          f"model must be an nnx.Module, got {type(model).__name__}; call"
          " replay.replay_log_probs instead."
      )
    self._model = model
    self._cached_logits_fn = cached_logits_fn
    self._logits_chunk = lm_head.check_chunk(logits_chunk)
    self._graphdef, self._state = nnx.split(model)

  def __call__(
      self, trace: trace_lib.Trace, state: nnx.State | None = None
  ) -> jax.Array:
    """float32 `[batch, completion_len]`, as `replay.replay_log_probs`.

    `state`, if given, is the whole state to replay under instead of the
    model's own, of the same structure (`nnx.state(model)`): a snapshot such
    as RL's start-of-step anchor needs no new `Replayer`.
    """
    trace = replay.check_trace(self._model, trace)
    size = trace.bd.block_size
    steps = np.asarray(trace.action_step)
    generated = np.flatnonzero((steps >= 0).any(axis=0))
    needed = int(generated[-1]) + 1 if generated.size else 1
    width = min(-(-needed // size) * size, steps.shape[1])
    trimmed = trace.replace(
        tokens=np.asarray(trace.tokens)[:, :width],
        action_step=steps[:, :width],
        action_logp=np.asarray(trace.action_logp)[:, :width],
        # The layout does not matter to replay: one compile for both.
        bd=dataclasses.replace(trace.bd, layout=bd_config.CLEAN_CONTEXT),
    )
    scores = _replay_graph(
        self._graphdef,
        self._state if state is None else state,
        trimmed,
        num_canvases=canvases.static_num_canvases(trimmed),
        context_length=canvases.static_context_length(trimmed),
        cached_logits_fn=self._cached_logits_fn,
        logits_chunk=self._logits_chunk,
    )
    return jnp.pad(scores, ((0, 0), (0, steps.shape[1] - width)))


def max_replay_error(
    model,
    trace: trace_lib.Trace,
    *,
    cached_logits_fn: diffusion_lm.CachedRowsFn = (
        cached_logits.block_rows_with_cache
    ),
) -> float:
  """Max |replayed - recorded| log-prob over the generated positions.

  Replay under the rollout's own parameters must give ~0 (docs/design.md
  invariant 6); `generate.py --config.verify_replay=True` reports this. An
  `nnx.Module` is replayed by a `Replayer`. 0.0 if no position was
  generated.
  """
  if isinstance(model, nnx.Module):
    replayed = Replayer(model, cached_logits_fn=cached_logits_fn)(trace)
  else:
    replayed = replay.replay_log_probs(
        model, trace, cached_logits_fn=cached_logits_fn
    )
  steps = np.asarray(trace.action_step)
  recorded = np.asarray(trace.action_logp, np.float64)
  error = np.abs(np.asarray(replayed, np.float64) - recorded)[steps >= 0]
  return float(error.max()) if error.size else 0.0
