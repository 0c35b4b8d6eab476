# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Target alignment helpers shared by the cache-free and cached logits.

Under `shifted` alignment (docs/design.md "Target alignment") the logit at
position p comes from the token at position p - 1 of the same segment (and
canvas), wherever it sits physically; these helpers find it by sorting,
O(L log L).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from tunix_bd.core import masks


def gather_rows(values: jax.Array, index: jax.Array) -> jax.Array:
  """`values[b, index[b, i]]` for `[batch, n, vocab]` values."""
  return jnp.take_along_axis(values, index[:, :, None], axis=1)


def sorted_order(positions, segment_ids, canvas_ids=None) -> jax.Array:
  """Per-row order: pads first, then by (canvas, segment, position)."""
  if canvas_ids is None:
    return jnp.lexsort((positions, segment_ids), axis=-1)
  return jnp.lexsort((positions, segment_ids, canvas_ids), axis=-1)


def predecessors(
    positions, segment_ids, canvas_ids=None
) -> tuple[jax.Array, jax.Array]:
  """Finds each token's logical predecessor by sorting, O(L log L).

  Args:
    positions: int `[batch, length]` logical positions, unique per segment
      (and canvas).
    segment_ids: int `[batch, length]`, 0 = pad.
    canvas_ids: int `[batch, length]` or None; the predecessor must be in
      the same canvas.

  Returns:
    `(index, found)`, each `[batch, length]`: `index[b, i]` is the physical
    index of the token at logical position `positions[b, i] - 1` in the same
    non-pad segment (and canvas), valid where `found` is True.
  """
  order = sorted_order(positions, segment_ids, canvas_ids)
  sorted_pos = jnp.take_along_axis(positions, order, axis=1)
  sorted_seg = jnp.take_along_axis(segment_ids, order, axis=1)
  prev = lambda x: jnp.concatenate([x[:, :1], x[:, :-1]], axis=1)
  found_sorted = (
      (jnp.arange(order.shape[1]) > 0)[None, :]
      & (sorted_seg != masks.PAD_SEGMENT_ID)
      & (prev(sorted_seg) == sorted_seg)
      & (prev(sorted_pos) == sorted_pos - 1)
  )
  if canvas_ids is not None:
    sorted_canvas = jnp.take_along_axis(canvas_ids, order, axis=1)
    found_sorted &= prev(sorted_canvas) == sorted_canvas
  # The inverse permutation takes sorted-order results back to physical order.
  rank = jnp.argsort(order, axis=1)
  index = jnp.take_along_axis(prev(order), rank, axis=1)
  found = jnp.take_along_axis(found_sorted, rank, axis=1)
  return index, found


def locate(
    q_positions, q_segment_ids, kv_positions, kv_segment_ids
) -> tuple[jax.Array, jax.Array]:
  """Where each query's (segment, position) sits among the keys, O(L log L).

  Args:
    q_positions: int `[batch, q_len]` logical positions to look up.
    q_segment_ids: int `[batch, q_len]`, 0 = pad (never found).
    kv_positions: int `[batch, kv_len]` positions, unique per segment.
    kv_segment_ids: int `[batch, kv_len]`, 0 = pad (never matched).

  Returns:
    `(index, found)`, each `[batch, q_len]`: the physical key index with the
    same non-pad segment and position, valid where `found` is True.
  """
  stride = jnp.maximum(jnp.max(kv_positions), jnp.max(q_positions)) + 1
  key = lambda pos, seg: jnp.where(
      seg != masks.PAD_SEGMENT_ID, seg * stride + pos, -1
  )
  kv_key, q_key = key(kv_positions, kv_segment_ids), key(
      q_positions, q_segment_ids
  )
  order = jnp.argsort(kv_key, axis=1)
  sorted_key = jnp.take_along_axis(kv_key, order, axis=1)
  slot = jax.vmap(jnp.searchsorted)(sorted_key, q_key)
  slot = jnp.minimum(slot, kv_key.shape[1] - 1)
  found = (jnp.take_along_axis(sorted_key, slot, axis=1) == q_key) & (
      q_key >= 0
  )
  return jnp.take_along_axis(order, slot, axis=1), found
