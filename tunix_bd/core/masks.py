# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Block-diffusion attention masks, as pure functions of positions.

Every mask is a function of logical positions and segment ids (0 = pad),
never of the physical index (docs/design.md "Logical positions",
"Segments"). The builders return `bool[batch, q_len, kv_len]` masks for
Tunix's dense attention path; `core.splash_attention` computes the same
masks inside the Splash kernel.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from tunix_bd import config_utils

PAD_SEGMENT_ID = 0
CLEAN_CANVAS_ID = 0


def check_ids(
    name: str, ids: Any, shape: tuple[int, ...] | None = None
) -> jax.Array:
  """An int `[batch, length]` array as int32; `shape` is one it must have."""
  ids = jnp.asarray(ids)
  if ids.ndim != 2:
    raise ValueError(
        f"{name} must have rank 2 [batch, length], got shape {ids.shape}."
    )
  if not jnp.issubdtype(ids.dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer array, got {ids.dtype}.")
  if shape is not None and ids.shape != tuple(shape):
    raise ValueError(
        f"{name} must have shape {tuple(shape)} (that of the tokens or"
        f" positions it goes with), got {ids.shape}."
    )
  return ids.astype(jnp.int32)


def block_causal_mask(
    q_positions: jax.Array,
    kv_positions: jax.Array,
    block_size: int,
    *,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
) -> jax.Array:
  """The single-canvas block-diffusion mask.

  Query q may attend key k iff `block(k) <= block(q)` and both are in the same
  non-pad segment (docs/design.md "Single-canvas mask"). For positions
  0..4, block size 2:

      k: 0 1 2 3 4
    q 0: 1 1 0 0 0
    q 1: 1 1 0 0 0
    q 2: 1 1 1 1 0
    q 3: 1 1 1 1 0
    q 4: 1 1 1 1 1

  Logical positions and segment ids (0 = pad or an unwritten cache slot;
  None on both sides puts every position in one segment) are int `[batch,
  q_len]` for the queries, `[batch, kv_len]` for the keys; `block_size` is
  static. Returns `bool[batch, q_len, kv_len]`, True where q attends k.
  """
  clean = lambda x: jnp.full(jnp.shape(x), CLEAN_CANVAS_ID, jnp.int32)
  return canvas_mask(
      q_positions,
      kv_positions,
      block_size,
      q_canvas_ids=clean(q_positions),
      kv_canvas_ids=clean(kv_positions),
      q_segment_ids=q_segment_ids,
      kv_segment_ids=kv_segment_ids,
  )


def canvas_mask(
    q_positions: jax.Array,
    kv_positions: jax.Array,
    block_size: int,
    *,
    q_canvas_ids: jax.Array,
    kv_canvas_ids: jax.Array,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
) -> jax.Array:
  """The mask of noisy canvases scored against a clean context.

  Canvas id `CLEAN_CANVAS_ID` (0) marks clean tokens; ids 1.. are noisy
  canvases, each the canvas of one block (at one denoising step). With q and
  k the blocks of the query and the key, all within one non-pad segment:
  clean->clean iff block(k) <= block(q); noisy->clean iff block(k) <
  block(q); noisy->noisy iff the same canvas (and block); clean->noisy
  never (docs/design.md "Clean-context layout"). Canvas ids are int
  `[batch, q_len]` / `[batch, kv_len]`; the other arguments and the result
  are as for `block_causal_mask`.
  """
  block_size = config_utils.check_int("block_size", block_size, 1)
  q_positions = check_ids("q_positions", q_positions)
  kv_positions = check_ids("kv_positions", kv_positions)
  if q_positions.shape[0] != kv_positions.shape[0]:
    raise ValueError(
        f"q_positions batch size {q_positions.shape[0]} differs from"
        f" kv_positions batch size {kv_positions.shape[0]}."
    )
  q_canvas = check_ids("q_canvas_ids", q_canvas_ids, q_positions.shape)
  kv_canvas = check_ids("kv_canvas_ids", kv_canvas_ids, kv_positions.shape)
  if (q_segment_ids is None) != (kv_segment_ids is None):
    # Fail closed: a one-sided default would silently merge or split segments.
    missing = "q_segment_ids" if q_segment_ids is None else "kv_segment_ids"
    raise ValueError(
        f"{missing} is None but the other segment ids are given; pass both"
        " or neither."
    )
  if q_segment_ids is None:  # One segment.
    q_segment_ids = jnp.ones(q_positions.shape, jnp.int32)
    kv_segment_ids = jnp.ones(kv_positions.shape, jnp.int32)
  q_segments = check_ids("q_segment_ids", q_segment_ids, q_positions.shape)
  kv_segments = check_ids("kv_segment_ids", kv_segment_ids, kv_positions.shape)
  q_blocks, kv_blocks = q_positions // block_size, kv_positions // block_size
  q_clean = (q_canvas == CLEAN_CANVAS_ID)[:, :, None]
  kv_clean = (kv_canvas == CLEAN_CANVAS_ID)[:, None, :]
  to_clean = jnp.where(
      q_clean,
      kv_blocks[:, None, :] <= q_blocks[:, :, None],
      kv_blocks[:, None, :] < q_blocks[:, :, None],
  )
  same_canvas = (q_canvas[:, :, None] == kv_canvas[:, None, :]) & (
      q_blocks[:, :, None] == kv_blocks[:, None, :]
  )
  to_noisy = ~q_clean & same_canvas
  # Equality with a non-pad key also rules out pad queries.
  same_segment = (q_segments[:, :, None] == kv_segments[:, None, :]) & (
      kv_segments != PAD_SEGMENT_ID
  )[:, None, :]
  return jnp.where(kv_clean, to_clean, to_noisy) & same_segment


def clean_context_mask(
    positions: jax.Array,
    block_size: int,
    *,
    segment_ids: jax.Array | None = None,
) -> jax.Array:
  """The BD3-LM / Fast-dLLM v2 training mask for `[noisy copy ; clean copy]`.

  Both copies carry the same positions and segment ids; the noisy copy is
  one canvas per block, scored by `canvas_mask`. For positions 0..2, block
  size 2 (noisy n0..n2, then clean c0..c2):

         n0 n1 n2 c0 c1 c2
    n0:   1  1  0  0  0  0
    n1:   1  1  0  0  0  0
    n2:   0  0  1  1  1  0
    c0:   0  0  0  1  1  0
    c1:   0  0  0  1  1  0
    c2:   0  0  0  1  1  1

  `positions` and `segment_ids` (None: one segment) are one copy's, int
  `[batch, length]`. Returns `bool[batch, 2 * length, 2 * length]`, the
  noisy copy's rows and columns first.
  """
  block_size = config_utils.check_int("block_size", block_size, 1)
  positions = check_ids("positions", positions)
  if segment_ids is None:
    segment_ids = jnp.ones(positions.shape, jnp.int32)
  segment_ids = check_ids("segment_ids", segment_ids, positions.shape)
  both = lambda x: jnp.concatenate([x, x], axis=1)
  canvas_ids = jnp.concatenate(
      [positions // block_size + 1, jnp.zeros_like(positions)], axis=1
  )
  return canvas_mask(
      both(positions),
      both(positions),
      block_size,
      q_canvas_ids=canvas_ids,
      kv_canvas_ids=canvas_ids,
      q_segment_ids=both(segment_ids),
      kv_segment_ids=both(segment_ids),
  )
