# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Replay scoring: the log-probs of a recorded denoising trace under a model.

A trace (see DESIGN.md "Trace") records, for every completion position, the
token, the step of its block at which it was committed (`action_step`, -1 if
the row stopped before its block) and its log-prob at that step. Replay
rebuilds the canvas each block had before each of its steps and scores the
recorded token there, so the live, reference and old policies of RL all
score the very actions the rollout took.

`replay_log_probs` is the vectorized scorer RL differentiates through: one
forward per step index s, with the clean-context layout `[noisy ; clean]`.
The noisy copy holds every block's canvas before its step s at once, the
clean copy the final tokens; under the clean-context mask each noisy block
sees exactly the clean earlier blocks and its own canvas, as the denoiser
did. The number of forwards is the number of steps per block, not the number
of blocks times that.

Layout of one row (length `prompt_len + completion_len`): the right-padded
prompt, then the completion; positions are logical, so the prompt's padding
(segment 0) is a gap the masks and the shift skip, and positions never
generated are padding too.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Protocol

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm

_FIELDS = (
    "prompt_tokens",
    "prompt_lengths",
    "tokens",
    "action_step",
    "action_logp",
)


class ReplayTrace(Protocol):
  """What replay reads from a trace (e.g. `tunix_bd.core.trace.Trace`).

  Attributes:
    prompt_tokens: int `[batch, prompt_len]` right-padded prompts.
    prompt_lengths: int `[batch]` real prompt lengths.
    tokens: int `[batch, completion_len]` completion tokens; position j of
      row r has logical position `prompt_lengths[r] + j`.
    action_step: int `[batch, completion_len]` step within its block at
      which each token was committed; -1 where never generated.
    action_logp: float `[batch, completion_len]` recorded log-probs.
    temperature: the sampling temperature (1.0 for greedy traces).
  """

  prompt_tokens: Any
  prompt_lengths: Any
  tokens: Any
  action_step: Any
  action_logp: Any
  temperature: Any


def _is_concrete(*xs) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _field(trace: Any, name: str) -> Any:
  if not hasattr(trace, name):
    raise ValueError(f"trace has no field {name!r}.")
  value = getattr(trace, name)
  return value if isinstance(value, jax.Array) else np.asarray(value)


def _check_array(name, value, ndim, integer, shape=None):
  if value.ndim != ndim:
    raise ValueError(
        f"trace.{name} must have rank {ndim}, got shape {value.shape}."
    )
  if integer != jnp.issubdtype(value.dtype, jnp.integer):
    kind = "an integer" if integer else "a float"
    raise ValueError(f"trace.{name} must be {kind} array, got {value.dtype}.")
  if shape is not None and tuple(value.shape) != tuple(shape):
    raise ValueError(
        f"trace.{name} must have shape {tuple(shape)}, got {value.shape}."
    )


def _temperature(trace: Any, temperature: Any) -> float:
  if temperature is None:
    if not hasattr(trace, "temperature"):
      raise ValueError("trace has no field 'temperature'.")
    temperature = trace.temperature
  if isinstance(temperature, jax.core.Tracer):
    raise ValueError(
        "temperature must be a static number, got a traced value; keep it"
        " out of jit arguments."
    )
  if isinstance(temperature, (np.ndarray, jax.Array)) and temperature.ndim:
    raise ValueError(f"temperature must be a scalar, got {temperature!r}.")
  try:
    value = float(temperature)
  except (TypeError, ValueError):
    value = float("nan")
  if isinstance(temperature, bool) or not 0.0 < value < float("inf"):
    raise ValueError(
        f"temperature must be a finite number > 0, got {temperature!r}."
    )
  return value


def _check_steps(steps, prompt_lengths, block_size, mask_id, tokens):
  """Concrete checks of `action_step` and the generated tokens."""
  if ((steps < -1) | (steps >= block_size)).any():
    bad = steps[(steps < -1) | (steps >= block_size)]
    raise ValueError(
        f"trace.action_step must be in [-1, block_size={block_size}), got"
        f" {sorted(set(bad.tolist()))}."
    )
  batch, length = steps.shape
  blocks = (prompt_lengths[:, None] + np.arange(length)) // block_size
  blocks -= blocks[:, :1]  # Block index relative to the first one.
  rows = np.broadcast_to(np.arange(batch)[:, None], steps.shape)
  size = np.zeros((batch, int(blocks.max()) + 1), np.int64)
  done = np.zeros_like(size)
  np.add.at(size, (rows, blocks), 1)
  np.add.at(done, (rows, blocks), steps >= 0)
  mixed = (done > 0) & (done < size)
  if mixed.any():
    row, block = np.argwhere(mixed)[0]
    raise ValueError(
        f"trace.action_step of row {row} has -1 in the middle of generated"
        f" completion block {block}; a row commits whole blocks."
    )
  generated = done > 0
  resumed = generated[:, 1:] & ~generated[:, :-1]
  if resumed.any():
    row, block = np.argwhere(resumed)[0]
    raise ValueError(
        f"trace.action_step of row {row} generates completion block"
        f" {block + 1} after an ungenerated block; -1 must be a tail."
    )
  if ((tokens == mask_id) & (steps >= 0)).any():
    raise ValueError(
        f"trace.tokens commits the mask token {mask_id}, which is never"
        " sampled."
    )


def _validate(model, trace, bd, temperature):
  """Checks a trace (fail closed); returns its arrays and the temperature.

  Static checks (ranks, dtypes, shapes) always run; value checks only on
  concrete arrays, i.e. not under `jit`.
  """
  if not isinstance(bd, bd_config.BlockDiffusionConfig):
    raise ValueError(
        f"bd must be a BlockDiffusionConfig, got {type(bd).__name__}."
    )
  trace_bd = getattr(trace, "bd", None)
  if trace_bd is not None:
    fields = ("block_size", "mask_token_id", "alignment")
    differ = [f for f in fields if getattr(trace_bd, f) != getattr(bd, f)]
    if differ:
      raise ValueError(
          f"bd differs from trace.bd in {differ}: a trace is scored with the"
          " settings it was generated with."
      )
  prompt, lengths, tokens, steps, logp = (_field(trace, f) for f in _FIELDS)
  _check_array("prompt_tokens", prompt, 2, True)
  batch, prompt_len = prompt.shape
  if prompt_len == 0:
    raise ValueError("trace.prompt_tokens is empty; a trace needs a prompt.")
  _check_array("prompt_lengths", lengths, 1, True, (batch,))
  _check_array("tokens", tokens, 2, True)
  if tokens.shape[0] != batch or tokens.shape[1] == 0:
    raise ValueError(
        f"trace.tokens must have shape [{batch}, completion_len >= 1], got"
        f" {tokens.shape}."
    )
  _check_array("action_step", steps, 2, True, tokens.shape)
  _check_array("action_logp", logp, 2, False, tokens.shape)
  temperature = _temperature(trace, temperature)

  if _is_concrete(lengths):
    np_lengths = np.asarray(lengths)
    try:
      bd.validate_prompt_lengths(np_lengths)
    except ValueError as e:
      raise ValueError(f"trace.prompt_lengths: {e}") from e
    if ((np_lengths < 1) | (np_lengths > prompt_len)).any():
      raise ValueError(
          f"trace.prompt_lengths must be in [1, {prompt_len}] (no empty"
          " prompt, at most the width of prompt_tokens), got"
          f" {np_lengths.tolist()}."
      )
    if _is_concrete(steps, tokens):
      np_steps, np_tokens = np.asarray(steps), np.asarray(tokens)
      _check_steps(
          np_steps, np_lengths, bd.block_size, bd.mask_token_id, np_tokens
      )
      vocab = getattr(getattr(model, "config", None), "vocab_size", None)
      if isinstance(vocab, int):
        out = (np_steps >= 0) & ((np_tokens < 0) | (np_tokens >= vocab))
        if out.any():
          raise ValueError(
              "trace.tokens has ids outside the model vocabulary [0,"
              f" {vocab}): {sorted(set(np_tokens[out].tolist()))}."
          )
  return (prompt, lengths, tokens, steps), temperature


def _num_steps(num_steps: int | None, steps: Any, block_size: int) -> int:
  """The static number of step forwards: given, read, or `block_size`."""
  concrete = _is_concrete(steps)
  if num_steps is None:
    return int(np.max(steps)) + 1 if concrete else block_size
  if isinstance(num_steps, bool) or not isinstance(num_steps, int):
    raise ValueError(f"num_steps must be an int, got {num_steps!r}.")
  if not 1 <= num_steps <= block_size:
    raise ValueError(
        f"num_steps must be in [1, block_size={block_size}], got {num_steps}."
    )
  if concrete and int(np.max(steps)) >= num_steps:
    raise ValueError(
        f"num_steps={num_steps} is too small: trace.action_step reaches"
        f" {int(np.max(steps))}."
    )
  return num_steps


def _replay(model, prompt, lengths, tokens, steps, *, bd, temperature, steps_n):
  """The vectorized replay of validated arrays; see `replay_log_probs`."""
  batch, prompt_len = prompt.shape
  completion_len = tokens.shape[1]
  lengths = jnp.asarray(lengths, jnp.int32)
  steps = jnp.asarray(steps, jnp.int32)
  generated = steps >= 0
  # Never-generated slots may hold anything (the pad id): they become pads.
  targets = jnp.where(generated, jnp.asarray(tokens, jnp.int32), 0)
  prompt_index = jnp.arange(prompt_len, dtype=jnp.int32)
  in_prompt = prompt_index[None, :] < lengths[:, None]
  positions = jnp.concatenate(
      [
          jnp.broadcast_to(prompt_index, (batch, prompt_len)),
          lengths[:, None] + jnp.arange(completion_len, dtype=jnp.int32),
      ],
      axis=1,
  )
  segments = jnp.concatenate([in_prompt, generated], axis=1).astype(jnp.int32)
  clean = jnp.concatenate(
      [jnp.where(in_prompt, jnp.asarray(prompt, jnp.int32), 0), targets],
      axis=1,
  )
  # The step after which each slot is on the canvas: prompt slots always,
  # completion slots once committed, never-generated slots (pads) never.
  committed_at = jnp.concatenate(
      [
          jnp.full((batch, prompt_len), -1, jnp.int32),
          jnp.where(generated, steps, jnp.iinfo(jnp.int32).max),
      ],
      axis=1,
  )
  config = dataclasses.replace(bd, layout=bd_config.CLEAN_CONTEXT)

  # Rematerialized in the backward pass: gradient memory of one forward
  # (and a much smaller program than saving every step's residuals). Inside
  # `scan`, CSE prevention is not needed.
  @functools.partial(jax.checkpoint, prevent_cse=False)
  def score_step(step):
    # Every block's canvas before its step `step`: a completion token is
    # there iff committed at an earlier step.
    noisy = jnp.where(committed_at < step, clean, config.mask_token_id)
    logits = diffusion_lm.diffusion_logits_fn(
        model, noisy, positions, segments, config=config, clean_tokens=clean
    )
    logp = diffusion_lm.token_log_probs(
        logits[:, prompt_len:], targets, temperature
    )
    return jnp.where(steps == step, logp, 0.0)

  zeros = jnp.zeros((batch, completion_len), jnp.float32)
  last_step = jnp.max(steps)

  def body(total, step):
    # Under jit `steps_n` is `block_size`; steps no block reached are
    # skipped at run time.
    logp = jax.lax.cond(step <= last_step, score_step, lambda _: zeros, step)
    return total + logp, None

  total, _ = jax.lax.scan(body, zeros, jnp.arange(steps_n, dtype=jnp.int32))
  return total


def replay_log_probs(
    model,
    trace: ReplayTrace,
    *,
    bd: bd_config.BlockDiffusionConfig,
    temperature: float | None = None,
    num_steps: int | None = None,
) -> jax.Array:
  """Log-probs of a trace's actions under `model`, one forward per step.

  Differentiable in the model's parameters and usable under `jax.jit` /
  `nnx.jit` (with the trace's arrays traced) and `jax.grad` /
  `nnx.value_and_grad`. The steps run in a `lax.scan`; each step is
  rematerialized in the backward pass (gradient memory of one forward), and
  a step that no block reached is skipped at run time.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, None, mask)`.
    trace: the recorded rollout (see `ReplayTrace`).
    bd: the block-diffusion settings the trace was generated with (those of
      `trace.bd` if it has them); `layout` is ignored: replay always uses
      the clean-context layout.
    temperature: the temperature to score at; None uses `trace.temperature`.
      Static (a Python number).
    num_steps: the static number of step forwards, more than the largest
      `action_step`; None reads it from a concrete trace and uses
      `bd.block_size` under jit.

  Returns:
    float32 `[batch, completion_len]` log-probs of `trace.tokens` at their
    commit steps; 0 where `action_step == -1`.

  Raises:
    ValueError: naming the field, for a malformed trace (shapes that
      disagree, an empty prompt, an `action_step` outside [-1, block_size)
      or with -1 inside a generated block or before a generated block, a
      committed mask token, ids outside the vocabulary), a `bd` that differs
      from `trace.bd`, a bad temperature or `num_steps`.
  """
  arrays, temperature = _validate(model, trace, bd, temperature)
  return _replay(
      model,
      *arrays,
      bd=bd,
      temperature=temperature,
      steps_n=_num_steps(num_steps, arrays[3], bd.block_size),
  )


def _replay_graph(graphdef, state, *arrays, bd, temperature):
  model = nnx.merge(graphdef, state)
  return _replay(
      model, *arrays, bd=bd, temperature=temperature, steps_n=bd.block_size
  )


# `block_size` scan steps (unreached ones skipped at run time), so traces
# with different numbers of steps share one compile.
_replay_graph_jit = jax.jit(
    _replay_graph, static_argnames=("bd", "temperature")
)


def compiled_replay_log_probs(
    model: nnx.Module,
    trace: ReplayTrace,
    *,
    bd: bd_config.BlockDiffusionConfig,
    temperature: float | None = None,
) -> jax.Array:
  """`replay_log_probs` for eager callers, through a cached compiled program.

  Validates the concrete trace, then runs one program compiled per model
  graph, array shapes, settings and temperature (not per trace). For
  verification and evaluation outside a jitted step; inside one, call
  `replay_log_probs`.

  Args:
    model: a Tunix decoder `nnx.Module`.
    trace: the recorded rollout, with concrete arrays.
    bd: as for `replay_log_probs`.
    temperature: as for `replay_log_probs`.

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
  arrays, temperature = _validate(model, trace, bd, temperature)
  prompt, lengths, tokens, steps = arrays
  width = _replay_width(np.asarray(steps), bd.block_size)
  graphdef, state = nnx.split(model)
  # The layout does not matter to replay: one compile for both.
  bd = dataclasses.replace(bd, layout=bd_config.CLEAN_CONTEXT)
  scores = _replay_graph_jit(
      graphdef,
      state,
      prompt,
      lengths,
      tokens[:, :width],
      steps[:, :width],
      bd=bd,
      temperature=temperature,
  )
  return jnp.pad(scores, ((0, 0), (0, tokens.shape[1] - width)))


def _replay_width(steps: np.ndarray, block_size: int) -> int:
  """Completion columns worth scoring: up to the last generated position.

  Rows stop early, so a rollout with a long budget often generates a small
  prefix of it; replaying the rest would score nothing at full cost. The
  width is rounded up to block_size times a power of two, so rollouts of
  similar lengths share one compiled program.
  """
  generated = np.flatnonzero((steps >= 0).any(axis=0))
  needed = int(generated[-1]) + 1 if generated.size else 1
  width = block_size
  while width < needed:
    width *= 2
  return min(width, steps.shape[1])


def max_replay_error(
    model, trace: ReplayTrace, *, bd: bd_config.BlockDiffusionConfig
) -> float:
  """Max |replayed - recorded| log-prob over the generated positions.

  Replay under the rollout's own parameters must give ~0 (DESIGN.md
  invariant 6); `generate.py --config.verify_replay=True` reports this. An
  `nnx.Module` is replayed by `compiled_replay_log_probs`.

  Args:
    model: the model that generated the trace.
    trace: the recorded rollout, with concrete arrays.
    bd: the block-diffusion settings it was generated with.

  Returns:
    The max absolute difference, 0.0 if no position was generated.

  Raises:
    ValueError: as `replay_log_probs`.
  """
  if isinstance(model, nnx.Module):
    replayed = compiled_replay_log_probs(model, trace, bd=bd)
  else:
    replayed = replay_log_probs(model, trace, bd=bd)
  steps = np.asarray(_field(trace, "action_step"))
  recorded = np.asarray(_field(trace, "action_logp"), np.float64)
  error = np.abs(np.asarray(replayed, np.float64) - recorded)[steps >= 0]
  return float(error.max()) if error.size else 0.0


def replay_log_probs_reference(
    model,
    trace: ReplayTrace,
    *,
    bd: bd_config.BlockDiffusionConfig,
    temperature: float | None = None,
) -> np.ndarray:
  """Brute-force replay: one single-canvas forward per row, block and step.

  For tests. Each forward sees row r's logical sequence (one fixed length,
  so one compile) with the positions after the block padded out and the
  block's not-yet-committed completion positions masked.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, None, mask)`.
    trace: the recorded rollout.
    bd: the block-diffusion settings (`layout` ignored).
    temperature: as for `replay_log_probs`.

  Returns:
    float32 `[batch, completion_len]`, as `replay_log_probs`.

  Raises:
    ValueError: as `replay_log_probs`.
  """
  arrays, temperature = _validate(model, trace, bd, temperature)
  prompt, lengths, tokens, steps = (np.asarray(a) for a in arrays)
  config = dataclasses.replace(bd, layout=bd_config.SINGLE_CANVAS)
  size = bd.block_size
  length = prompt.shape[1] + tokens.shape[1]
  out = np.zeros(steps.shape, np.float32)
  for row in range(steps.shape[0]):
    start = int(lengths[row])
    sequence = np.zeros(length, np.int64)
    sequence[:start] = prompt[row, :start]
    sequence[start : start + tokens.shape[1]] = tokens[row]
    commit_step = np.full(length, -1)
    commit_step[start : start + tokens.shape[1]] = steps[row]
    for block in np.unique(np.flatnonzero(commit_step >= 0) // size):
      end = (block + 1) * size
      here = np.flatnonzero(
          (np.arange(length) // size == block) & (commit_step >= 0)
      )
      for step in range(commit_step[here].max() + 1):
        canvas = sequence.copy()
        canvas[here[commit_step[here] >= step]] = bd.mask_token_id
        segments = np.arange(length) < min(end, start + tokens.shape[1])
        logits = diffusion_lm.diffusion_logits_fn(
            model,
            canvas[None],
            np.arange(length)[None],
            segments[None].astype(np.int32),
            config=config,
        )
        logp = np.asarray(diffusion_lm.log_probs(logits, temperature))[0]
        for i in here[commit_step[here] == step]:
          out[row, i - start] = logp[i, sequence[i]]
  return out
