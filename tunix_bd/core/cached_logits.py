# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Rows of blocks against a block KV cache: the default `CachedRowsFn`.

`block_rows_with_cache` evaluates one block of a canvas against the cached
clean earlier blocks and gives the rows `diffusion_lm.diffusion_rows` gives
for those positions on the whole single canvas (to float tolerance;
docs/design.md "KV cache"): one attend step (mask, forward, cache write),
then the alignment of a committed block (`_commit_rows`) or of packed
noisy canvases (`_canvas_rows`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import masks


def _rewind(new_kv: dict, old_kv: dict, commit_length: int) -> dict:
  """`new_kv` with every `end_index` leaf `commit_length` past `old_kv`'s."""
  # Every supported family's cache has them (`block_cache.init_block_cache`).
  return jax.tree_util.tree_map_with_path(
      lambda path, new, old: (
          old + commit_length
          if getattr(path[-1], "key", None) == "end_index"
          else new
      ),
      new_kv,
      old_kv,
  )


def block_rows_with_cache(
    model,
    block_tokens: jax.Array,
    block_positions: jax.Array,
    block_segment_ids: jax.Array | None,
    cache: block_cache.BlockCache,
    *,
    config: bd_config.BlockDiffusionConfig,
    commit_length: int | None = None,
    canvas_ids: jax.Array | None = None,
) -> tuple[lm_head.Rows, block_cache.BlockCache]:
  """Target-aligned rows of one block against the cached earlier blocks.

  Each row's non-pad tokens must be whole logical blocks (or the final
  partial block), evaluated in order. A denoising step discards the returned
  cache; committing a block evaluates it clean and keeps the cache, alone or
  followed by the next block's canvas with `commit_length` set.
  `config.layout` does not matter here: the cache holds clean blocks.

  With `canvas_ids`, the columns are noisy canvases of packed replay, scored
  under `masks.canvas_mask` against the cache (which must keep block ends
  under `shifted`) and any clean context columns (canvas id 0) of this
  call. Nothing is committed: the cache comes back unchanged.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, kv, mask)`.
    block_tokens: int `[batch, block_len]` canvas of the block.
    block_positions: int `[batch, block_len]` logical positions.
    block_segment_ids: int `[batch, block_len]`, 0 = pad; None means all 1.
    commit_length: commit only the first `commit_length` columns (whole
      blocks, clean); the rest are evaluated but stay unwritten in the new
      cache (segment id 0, `end_index` after the committed columns), so the
      next call overwrites them. None commits all `block_len`.
    canvas_ids: int `[batch, block_len]` ids >= 1 of noisy canvases (0 for
      clean context columns before them), or None (a clean block or one
      denoising canvas).

  Returns:
    `(rows, new_cache)`: `lm_head.Rows` `[batch, block_len, ...]` as
    `diffusion_rows` gives them for these positions, and the cache with the
    committed columns written; its boundary is the last committed token.
  """
  tokens, positions, segments = diffusion_lm.check_inputs(
      model,
      block_tokens,
      block_positions,
      block_segment_ids,
      config,
      prefix="block_",
  )
  head = lm_head.split_head(model, config.mask_token_id)
  block_len = tokens.shape[1]
  if canvas_ids is not None:
    if commit_length is not None:
      raise ValueError("canvas_ids columns are never committed.")
    if cache.block_end_rows is None and (config.alignment == bd_config.SHIFTED):
      raise ValueError(
          "canvas_ids under shifted alignment need a cache made with"
          " block_end_rows_of=block_size."
      )
    ids = masks.check_ids("canvas_ids", canvas_ids, tokens.shape)
  else:
    if commit_length is None:
      commit_length = block_len
    if (
        isinstance(commit_length, bool)
        or not isinstance(commit_length, int)
        or not 1 <= commit_length <= block_len
    ):
      raise ValueError(
          f"commit_length must be an int in [1, {block_len}] (the block"
          f" length), got {commit_length!r}."
      )
    _check_room(cache, tokens.shape)
    # A clean block: canvas id 0 everywhere is the block-causal mask.
    ids = jnp.zeros_like(tokens)
  # The block's slots are written at the cache's end before it attends;
  # cached slots are clean (canvas id 0).
  put = lambda x, v: jax.lax.dynamic_update_slice(x, v, (0, cache.end_index))
  written = cache.replace(
      positions=put(cache.positions, positions),
      segment_ids=put(cache.segment_ids, segments),
  )
  mask = masks.canvas_mask(
      positions,
      written.positions,
      config.block_size,
      q_canvas_ids=ids,
      kv_canvas_ids=put(jnp.zeros_like(cache.segment_ids), ids),
      q_segment_ids=segments,
      kv_segment_ids=written.segment_ids,
  )
  raw, new_kv = diffusion_lm.forward(
      model, tokens, positions, cache.kv, mask, head is not None
  )
  if canvas_ids is not None:
    rows = _canvas_rows(raw, positions, segments, ids, cache, config)
    return diffusion_lm.rows_of(rows, head, config.mask_token_id), cache
  rows = _commit_rows(raw, positions, segments, cache, config)
  new_cache = _commit(written, raw, new_kv, positions, segments, commit_length)
  if cache.block_end_rows is not None:
    new_cache = _keep_block_ends(
        new_cache, raw, positions, segments, commit_length, config.block_size
    )
  return diffusion_lm.rows_of(rows, head, config.mask_token_id), new_cache


def block_logits_with_cache(
    model,
    block_tokens: jax.Array,
    block_positions: jax.Array,
    block_segment_ids: jax.Array | None,
    cache: block_cache.BlockCache,
    *,
    config: bd_config.BlockDiffusionConfig,
    commit_length: int | None = None,
    canvas_ids: jax.Array | None = None,
) -> tuple[jax.Array, block_cache.BlockCache]:
  """`(logits, new_cache)` of `block_rows_with_cache` (same arguments): the
  rows' float32 `[batch, block_len, vocab]` logits, the mask column
  `MASKED_LOGIT`, 0 where a position has no predictor."""
  rows, new_cache = block_rows_with_cache(
      model,
      block_tokens,
      block_positions,
      block_segment_ids,
      cache,
      config=config,
      commit_length=commit_length,
      canvas_ids=canvas_ids,
  )
  return lm_head.dense_logits(rows), new_cache


def _check_room(cache, shape):
  """Fails closed on a batch or a block the cache has no room for."""
  batch, block_len = shape
  cache_batch, cache_size = cache.positions.shape
  if batch != cache_batch:
    raise ValueError(
        f"block_tokens batch size {batch} differs from the cache's"
        f" {cache_batch}."
    )
  end = cache.end_index
  if not isinstance(end, jax.core.Tracer) and int(end) + block_len > cache_size:
    # Tunix would wrap around and overwrite the oldest slots.
    raise ValueError(
        f"the cache has {cache_size - int(end)} free slots, but the block"
        f" has {block_len}; use a larger cache_size."
    )


def _commit_rows(raw, positions, segments, cache, config):
  """A committed block's aligned rows: a first token's predictor is the
  cache's boundary (the last committed token before it)."""
  if config.alignment == bd_config.SAME_POSITION:
    return raw
  index, found = diffusion_lm.predecessors(positions, segments)
  from_boundary = (
      ~found
      & (segments != masks.PAD_SEGMENT_ID)
      & (cache.boundary_segment_ids[:, None] == segments)
      & (cache.boundary_positions[:, None] == positions - 1)
  )
  return jnp.where(
      found[:, :, None],
      diffusion_lm.gather_rows(raw, index),
      jnp.where(
          from_boundary[:, :, None], cache.boundary_rows[:, None, :], 0.0
      ),
  )


def _commit(cache, raw, new_kv, positions, segments, commit_length):
  """The cache with the first `commit_length` columns committed; `cache`
  has the whole block's slot positions and segments written."""
  cache_size = cache.positions.shape[1]
  kv_positions, kv_segments = cache.positions, cache.segment_ids
  new_end = cache.end_index + commit_length
  if commit_length < positions.shape[1]:
    # Uncommitted slots read as unwritten: masked out, and overwritten by the
    # next call, which writes at the rewound `end_index`.
    written = jnp.arange(cache_size) < new_end
    kv_positions = jnp.where(written, kv_positions, 0)
    kv_segments = jnp.where(written, kv_segments, masks.PAD_SEGMENT_ID)
    new_kv = _rewind(new_kv, cache.kv, commit_length)
  # The new boundary is the last committed token in (segment, position)
  # order; a row without one keeps its old boundary.
  committed = slice(0, commit_length)
  last = diffusion_lm.sorted_order(
      positions[:, committed], segments[:, committed]
  )[:, -1:]
  last_segment = jnp.take_along_axis(segments, last, axis=1)[:, 0]
  has_tokens = last_segment != masks.PAD_SEGMENT_ID
  return cache.replace(
      kv=new_kv,
      positions=kv_positions,
      segment_ids=kv_segments,
      end_index=new_end,
      boundary_rows=jnp.where(
          has_tokens[:, None],
          diffusion_lm.gather_rows(raw, last)[:, 0],
          cache.boundary_rows,
      ),
      boundary_positions=jnp.where(
          has_tokens,
          jnp.take_along_axis(positions, last, axis=1)[:, 0],
          cache.boundary_positions,
      ),
      boundary_segment_ids=jnp.where(
          has_tokens, last_segment, cache.boundary_segment_ids
      ),
  )


def _keep_block_ends(cache, raw, positions, segments, commit_length, size):
  """The cache with the committed block ends' raw rows added."""
  num_blocks = cache.block_end_segments.shape[1]
  committed = jnp.arange(positions.shape[1]) < commit_length
  is_end = committed & (segments != masks.PAD_SEGMENT_ID)
  is_end &= (positions + 1) % size == 0
  # Columns that end no block scatter out of range, and are dropped.
  block = jnp.where(is_end, positions // size, num_blocks)
  rows = jnp.broadcast_to(jnp.arange(raw.shape[0])[:, None], block.shape)
  return cache.replace(
      block_end_rows=cache.block_end_rows.at[rows, block].set(raw, mode="drop"),
      block_end_segments=cache.block_end_segments.at[rows, block].set(
          segments, mode="drop"
      ),
  )


def _canvas_rows(raw, positions, segments, ids, cache, config):
  """Packed noisy canvases' aligned rows: a block's first token's predictor
  is the end of the clean block before it, among this call's clean columns
  or else cached."""
  if config.alignment == bd_config.SAME_POSITION:
    return raw
  index, found = diffusion_lm.predecessors(positions, segments, ids)
  first = (
      ~found
      & (positions % config.block_size == 0)
      & (positions >= config.block_size)
      & (segments != masks.PAD_SEGMENT_ID)
  )
  pad = masks.PAD_SEGMENT_ID
  clean = ids == masks.CLEAN_CANVAS_ID
  here, in_call = _locate(
      positions - 1,
      jnp.where(first, segments, pad),
      positions,
      jnp.where(clean, segments, pad),
  )
  previous = positions // config.block_size - 1
  previous = jnp.clip(previous, 0, cache.block_end_segments.shape[1] - 1)
  from_cache = (
      first
      & ~in_call
      & (jnp.take_along_axis(cache.block_end_segments, previous, 1) == segments)
  )
  return jnp.where(
      found[:, :, None],
      diffusion_lm.gather_rows(raw, index),
      jnp.where(
          in_call[:, :, None],
          diffusion_lm.gather_rows(raw, here),
          jnp.where(
              from_cache[:, :, None],
              diffusion_lm.gather_rows(cache.block_end_rows, previous),
              0.0,
          ),
      ),
  )


def _locate(
    q_positions, q_segment_ids, kv_positions, kv_segment_ids
) -> tuple[jax.Array, jax.Array]:
  """`(index, found)`, each `[batch, q_len]`: the physical key index with
  each query's non-pad (segment, position), valid where `found`; key
  positions are unique per segment. By sorting, O(L log L)."""
  stride = jnp.maximum(jnp.max(kv_positions), jnp.max(q_positions)) + 1
  key = lambda pos, seg: jnp.where(
      seg != masks.PAD_SEGMENT_ID, seg * stride + pos, -1
  )
  kv_key = key(kv_positions, kv_segment_ids)
  q_key = key(q_positions, q_segment_ids)
  order = jnp.argsort(kv_key, axis=1)
  sorted_key = jnp.take_along_axis(kv_key, order, axis=1)
  slot = jax.vmap(jnp.searchsorted)(sorted_key, q_key)
  slot = jnp.minimum(slot, kv_key.shape[1] - 1)
  found = (jnp.take_along_axis(sorted_key, slot, axis=1) == q_key) & (
      q_key >= 0
  )
  return jnp.take_along_axis(order, slot, axis=1), found
