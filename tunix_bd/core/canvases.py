# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The canvases of a trace: what each block looked like before each step.

docs/design.md "Step canvases": `sequence` (the clean rows) and
`packed_canvases` (the occurring canvases), from concrete or traced traces;
never-generated slots and prompt padding are pads (segment 0).
"""

from __future__ import annotations

import functools

import flax
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import trace as trace_lib


@flax.struct.dataclass
class Sequence:
  """A trace's rows in the sequence layout, `[batch, prompt_len + T]`.

  Attributes:
    tokens: int32 clean tokens; 0 at pads.
    positions: int32 logical positions (prompt then completion, gapless).
    segment_ids: int32, 1 on real tokens, 0 at pads.
  """

  tokens: jax.Array
  positions: jax.Array
  segment_ids: jax.Array


def sequence(trace: trace_lib.Trace) -> Sequence:
  """The clean rows of a trace in the sequence layout."""
  prompt = jnp.asarray(trace.prompt_tokens, jnp.int32)
  lengths = jnp.asarray(trace.prompt_lengths, jnp.int32)
  steps = jnp.asarray(trace.action_step, jnp.int32)
  batch, prompt_len = prompt.shape
  generated = steps >= 0
  column = jnp.arange(prompt_len, dtype=jnp.int32)
  in_prompt = column[None, :] < lengths[:, None]
  both = lambda a, b: jnp.concatenate([a, b], axis=1)
  return Sequence(
      tokens=both(
          jnp.where(in_prompt, prompt, 0),
          jnp.where(generated, jnp.asarray(trace.tokens, jnp.int32), 0),
      ),
      positions=both(
          jnp.broadcast_to(column, (batch, prompt_len)),
          lengths[:, None] + jnp.arange(steps.shape[1], dtype=jnp.int32),
      ),
      segment_ids=both(in_prompt, generated).astype(jnp.int32),
  )


def _at_positions(trace: trace_lib.Trace, position: jax.Array):
  """What each row holds at logical positions `position` (int `[batch, ...]`).

  `(slot, step, token)`, each of `position`'s shape: the completion slot
  (negative in the prompt), its commit step (-1 in the prompt, for slots
  never generated and past the budget) and the token there (garbage past
  both the prompt and the completion).
  """
  prompt = jnp.asarray(trace.prompt_tokens, jnp.int32)
  lengths = jnp.asarray(trace.prompt_lengths, jnp.int32)
  steps = jnp.asarray(trace.action_step, jnp.int32)
  batch = prompt.shape[0]
  slot = position - lengths.reshape((batch,) + (1,) * (position.ndim - 1))
  take = lambda x, i: jnp.take_along_axis(
      x, jnp.clip(i, 0, x.shape[1] - 1).reshape(batch, -1), axis=1
  ).reshape(i.shape)
  in_budget = (slot >= 0) & (slot < steps.shape[1])
  step = jnp.where(in_budget, take(steps, slot), -1)
  tokens = jnp.asarray(trace.tokens, jnp.int32)
  token = jnp.where(slot < 0, take(prompt, position), take(tokens, slot))
  return slot, step, token


def context_length(trace: trace_lib.Trace) -> int:
  """Clean positions the canvases of a concrete trace attend: whole blocks.

  A canvas sees the clean blocks before its own, so each row needs the
  positions below its last generated block; the most of any row, at least
  one block.
  """
  size = trace.bd.block_size
  steps = np.asarray(trace.action_step)
  lengths = np.asarray(trace.prompt_lengths)
  last = np.max(np.where(steps >= 0, np.arange(steps.shape[1]), -1), axis=1)
  starts = np.where(last >= 0, (lengths + last) // size * size, 0)
  return max(int(starts.max()), size)


def clean_context(trace: trace_lib.Trace, length: int) -> Sequence:
  """The first `length` logical positions of each row, clean, by position.

  Column j holds logical position j: the prompt, then the generated
  completion slots, then pads (segment 0). A `Sequence` of `[batch,
  length]` (`length` static, >= 1).
  """
  batch = np.shape(trace.prompt_tokens)[0]
  position = jnp.arange(length, dtype=jnp.int32)[None, :]
  position = jnp.broadcast_to(position, (batch, length))
  slot, step, token = _at_positions(trace, position)
  in_prompt, generated = slot < 0, step >= 0
  return Sequence(
      tokens=jnp.where(in_prompt | generated, token, 0),
      positions=position,
      segment_ids=(in_prompt | generated).astype(jnp.int32),
  )


def num_completion_blocks(block_size: int, completion_len: int) -> int:
  """The most blocks a completion of `completion_len` slots can touch (one
  starting at the last offset of a block)."""
  return (completion_len + block_size - 2) // block_size + 1


def count_canvases(trace: trace_lib.Trace) -> int:
  """The most (block, step) canvases of any row (concrete traces only)."""
  steps = np.asarray(trace.action_step)
  blocks = trace_lib.completion_blocks(
      np.asarray(trace.prompt_lengths), steps.shape[1], trace.bd.block_size
  )
  rows = np.broadcast_to(np.arange(steps.shape[0])[:, None], steps.shape)
  counts = np.zeros((steps.shape[0], int(blocks.max()) + 1), np.int64)
  np.maximum.at(counts, (rows, blocks), steps + 1)
  return max(int(counts.sum(axis=1).max()), 1)


@flax.struct.dataclass
class PackedCanvases:
  """The occurring canvases of a trace, `[batch, num_canvases * block_size]`.

  Canvas c of a row occupies columns `[c * S, (c + 1) * S)`: a row's
  (block, step) pairs in order, then empty canvases (all pads).

  Attributes:
    tokens: int32 canvas tokens (mask ids where not yet committed).
    positions: int32 logical positions.
    segment_ids: int32, 1 on real tokens, 0 at pads.
    canvas_ids: int32 `c + 1`, ids for `masks.canvas_mask`.
    targets: int32 the committed token of scored slots, 0 elsewhere.
    scored: bool, the slots committed at their canvas's step.
    slot: int32 the completion column of each canvas column, 0 if none.
  """

  tokens: jax.Array
  positions: jax.Array
  segment_ids: jax.Array
  canvas_ids: jax.Array
  targets: jax.Array
  scored: jax.Array
  slot: jax.Array


def packed_canvases(
    trace: trace_lib.Trace, num_canvases: int
) -> PackedCanvases:
  """Packs every row's occurring (block, step) canvases, in order.

  `num_canvases` (static) is at least `count_canvases`: rows with fewer get
  empty canvases. Each completion slot is scored in exactly one canvas.
  """
  size, mask_id = trace.bd.block_size, trace.bd.mask_token_id
  lengths = jnp.asarray(trace.prompt_lengths, jnp.int32)
  steps = jnp.asarray(trace.action_step, jnp.int32)
  batch, width = steps.shape
  # `[batch, blocks]` denoising steps of each completion block.
  blocks = trace_lib.completion_blocks(lengths, width, size)
  rows = jnp.broadcast_to(jnp.arange(batch)[:, None], steps.shape)
  counts = jnp.zeros((batch, num_completion_blocks(size, width)), jnp.int32)
  counts = counts.at[rows, blocks].max(steps + 1)
  ends = jnp.cumsum(counts, axis=1)
  canvas = jnp.arange(num_canvases, dtype=jnp.int32)
  # Canvas c shows block k at step s, with k the first block ending after c.
  block = jnp.sum(ends[:, None, :] <= canvas[None, :, None], axis=2)
  valid = canvas[None, :] < ends[:, -1:]
  block = jnp.minimum(block, counts.shape[1] - 1)
  step = canvas[None, :] - jnp.take_along_axis(ends - counts, block, axis=1)
  # Logical position of each column: `[batch, num_canvases, size]`.
  first = (lengths // size)[:, None, None] + block[:, :, None]
  position = first * size + jnp.arange(size, dtype=jnp.int32)
  slot, slot_step, token = _at_positions(trace, position)
  in_prompt = slot < 0
  real = valid[:, :, None] & (in_prompt | (slot_step >= 0))
  committed = slot_step < step[:, :, None]
  canvas_tokens = jnp.where(in_prompt | committed, token, mask_id)
  scored = real & (slot_step == step[:, :, None])
  flat = lambda x: x.reshape(batch, num_canvases * size)
  return PackedCanvases(
      tokens=flat(jnp.where(real, canvas_tokens, 0)),
      positions=flat(jnp.where(real, position, 0)),
      segment_ids=flat(real.astype(jnp.int32)),
      canvas_ids=flat(jnp.broadcast_to(canvas[None, :, None] + 1, real.shape)),
      targets=flat(jnp.where(scored, token, 0)),
      scored=flat(scored),
      slot=flat(jnp.where(scored, slot, 0)),
  )


# Query tokens per forward: enough canvases to amortize a forward, few enough
# that attention stays linear in the number of canvases.
GROUP_TOKENS = 64


def group_size(block_size: int) -> int:
  """Canvases scored per forward at most: about `GROUP_TOKENS` query tokens."""
  return max(1, GROUP_TOKENS // block_size)


def canvases_per_forward(block_size: int, num_canvases: int) -> int:
  """Canvases each replay forward scores, given the static count per row.

  Never wider than the canvases (padding costs whole forwards); it divides
  any count `static_num_canvases` returns.
  """
  return min(group_size(block_size), num_canvases)


def canvas_bucket(count: int, block_size: int) -> int:
  """`count` canvases per row rounded up to a static bucket.

  A power of two below one group, whole groups above: short rollouts (RL's
  answers often fit in a canvas or two) are not padded to a whole group,
  and a group always divides the bucket.
  """
  group = group_size(block_size)
  if count >= group:
    return -(-count // group) * group
  return min(1 << (count - 1).bit_length(), group)


def _static_size(name, given, need, most, unit):
  """`given`, checked, or else `need`: what a concrete trace needs (None for
  a traced one, which gets `most`)."""
  if given is None:
    return most if need is None else need
  if isinstance(given, bool) or not isinstance(given, int):
    raise ValueError(f"{name} must be an int, got {given!r}.")
  if not 1 <= given <= most:
    raise ValueError(f"{name} must be in [1, {most}], got {given}.")
  if need is not None and need > given:
    raise ValueError(
        f"{name}={given} is too small: the trace needs {need} {unit}."
    )
  return given


def _concrete(trace: trace_lib.Trace) -> bool:
  return not isinstance(trace.action_step, jax.core.Tracer)


def static_num_canvases(
    trace: trace_lib.Trace, num_canvases: int | None = None
) -> int:
  """Static canvases per row: given, counted, or the most possible.

  Rounded up to its `canvas_bucket` (a count so rounded is accepted again),
  so traces of similar shapes share one program.
  """
  size, width = trace.bd.block_size, np.shape(trace.tokens)[1]
  bucket = functools.partial(canvas_bucket, block_size=size)
  need = count_canvases(trace) if _concrete(trace) else None
  most = bucket(num_completion_blocks(size, width) * size)
  unit = "(block, step) canvases in a row"
  return bucket(_static_size("num_canvases", num_canvases, need, most, unit))


def static_context_length(
    trace: trace_lib.Trace, length: int | None = None
) -> int:
  """Static clean positions per row: given, counted, or the whole sequence.

  Rounded up to whole blocks. Any length from the counted one up gives the
  same replay: the canvases never attend the positions past it.
  """
  size = trace.bd.block_size
  bucket = lambda length: -(-length // size) * size  # Whole blocks.
  need = context_length(trace) if _concrete(trace) else None
  most = bucket(np.shape(trace.prompt_tokens)[1] + np.shape(trace.tokens)[1])
  given = _static_size("context_length", length, need, most, "clean positions")
  return bucket(given)
