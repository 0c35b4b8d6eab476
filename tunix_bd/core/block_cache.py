# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""An exact block KV cache for block-diffusion decoding.

Under the block-causal mask a block attends only to earlier blocks and to
itself, so the keys and values of committed (clean) blocks can be cached:
`block_logits_with_cache` evaluates one block of a canvas against the cache
and gives the target-aligned logits `diffusion_lm.diffusion_logits_fn` gives
for those positions on the whole single canvas (to float tolerance).

A decoder commits the prompt's complete blocks, then for each block runs
denoising steps with `block_logits_with_cache` (discarding the returned
cache). A clean block is written by a forward over it and the next block's
canvas together (`commit_length`): the block-causal mask keeps the clean
block blind to the next one, so its keys and values are exactly those of a
forward of its own, and the next block's logits are those of its first
denoising step. Shifted alignment needs the raw logit of the last committed
token (the predictor of the next block's first token); the cache carries it.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
from tunix_bd.core import alignment
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import masks


@flax.struct.dataclass
class BlockCache:
  """A model KV cache of committed blocks plus what masks and shifts need.

  Slots `[0, end_index)` hold committed tokens; a block call writes its own
  slots `[end_index, end_index + block_len)` before attending.

  Attributes:
    kv: the model's own cache (`model.init_cache(...)`); Tunix models write
      at their per-layer `end_index`, which advances in step with ours.
    positions: int32 `[batch, cache_size]` logical positions of the slots.
    segment_ids: int32 `[batch, cache_size]`, 0 = pad or not yet written.
    end_index: int32 scalar, the number of committed slots.
    boundary_logits: float32 `[batch, vocab]` raw logit at each row's last
      committed token (the shifted-alignment predictor of the next block's
      first token); zeros if none.
    boundary_positions: int32 `[batch]` logical position of that token, -1
      if none.
    boundary_segment_ids: int32 `[batch]` its segment id, 0 if none.
    canvas_ids: int32 `[batch, cache_size]` canvas ids of the slots (0 =
      clean; see `masks.canvas_mask`).
    committed_logits: float32 `[batch, cache_size, vocab]` raw logits of the
      committed slots, kept only by a cache made with `keep_logits=True`
      (packed canvases read their blocks' predictors there); else None.
  """

  kv: dict
  positions: jax.Array
  segment_ids: jax.Array
  end_index: jax.Array
  boundary_logits: jax.Array
  boundary_positions: jax.Array
  boundary_segment_ids: jax.Array
  canvas_ids: jax.Array
  committed_logits: jax.Array | None


def init_block_cache(
    model,
    batch_size: int,
    cache_size: int,
    *,
    vocab_size: int | None = None,
    dtype: jnp.dtype = jnp.float32,
    keep_logits: bool = False,
) -> BlockCache:
  """An empty `BlockCache` over the model's empty KV cache.

  Args:
    model: a Tunix decoder of a supported family (`families`).
    batch_size: rows, >= 1.
    cache_size: slots, >= 1; at least the total canvas length.
    vocab_size: logits width; None reads `model.config.vocab_size`.
    dtype: the KV dtype passed to `init_cache`.
    keep_logits: also keep the raw logits of committed slots (memory
      `[batch, cache_size, vocab]`), for `canvas_ids` calls.

  Returns:
    The empty cache.

  Raises:
    ValueError: for a non-positive size or an unsupported model.
  """
  for name, value in (("batch_size", batch_size), ("cache_size", cache_size)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
  if vocab_size is None:
    vocab_size = model.config.vocab_size
  return BlockCache(
      kv=families.init_kv_cache(model, batch_size, cache_size, dtype),
      positions=jnp.zeros((batch_size, cache_size), jnp.int32),
      segment_ids=jnp.zeros((batch_size, cache_size), jnp.int32),
      end_index=jnp.zeros((), jnp.int32),
      boundary_logits=jnp.zeros((batch_size, vocab_size), jnp.float32),
      boundary_positions=jnp.full((batch_size,), -1, jnp.int32),
      boundary_segment_ids=jnp.zeros((batch_size,), jnp.int32),
      canvas_ids=jnp.zeros((batch_size, cache_size), jnp.int32),
      committed_logits=(
          jnp.zeros((batch_size, cache_size, vocab_size), jnp.float32)
          if keep_logits
          else None
      ),
  )


def _is_concrete(*xs) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _rewind(new_kv: dict, old_kv: dict, commit_length: int) -> dict:
  """`new_kv` with every `end_index` leaf `commit_length` past `old_kv`'s.

  Raises:
    ValueError: if the model cache has no `end_index` (not a Tunix cache).
  """
  found = []

  def leaf(path, new, old):
    if getattr(path[-1], "key", None) == "end_index":
      found.append(path)
      return old + commit_length
    return new

  rewound = jax.tree_util.tree_map_with_path(leaf, new_kv, old_kv)
  if not found:
    raise ValueError(
        "commit_length needs a model cache with `end_index` entries (Tunix"
        " layout) to rewind; this cache has none."
    )
  return rewound


def block_logits_with_cache(
    model,
    block_tokens: jax.Array,
    block_positions: jax.Array,
    block_segment_ids: jax.Array | None,
    cache: BlockCache,
    *,
    config: bd_config.BlockDiffusionConfig,
    commit_length: int | None = None,
    canvas_ids: jax.Array | None = None,
) -> tuple[jax.Array, BlockCache]:
  """Target-aligned logits of one block against the cached earlier blocks.

  Each row's non-pad tokens must be whole logical blocks (or the final
  partial block), evaluated in order. A denoising step discards the returned
  cache; committing a block evaluates it clean and keeps the cache, alone or
  followed by the next block's canvas with `commit_length` set.
  `config.layout` does not matter here: the cache holds clean blocks.

  With `canvas_ids`, the columns are noisy canvases (packed replay), each
  one block at one step, scored against a cache that may hold every block
  clean: under `masks.canvas_mask` a canvas sees the cached blocks before
  its own and itself, and under `shifted` alignment its block's first token
  is predicted by the cached raw logit of the token before (the cache must
  keep logits). Nothing is committed: the cache comes back unchanged.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, kv, mask)`.
    block_tokens: int `[batch, block_len]` canvas of the block.
    block_positions: int `[batch, block_len]` logical positions.
    block_segment_ids: int `[batch, block_len]`, 0 = pad; None means all 1.
    cache: the committed earlier blocks.
    config: the block-diffusion settings (static under jit).
    commit_length: commit only the first `commit_length` columns (whole
      blocks, clean); the rest are evaluated but stay unwritten in the new
      cache (segment id 0, `end_index` after the committed columns), so the
      next call overwrites them. None commits all `block_len`.
    canvas_ids: int `[batch, block_len]` ids >= 1 of noisy canvases, or
      None (a clean block or one denoising canvas).

  Returns:
    `(logits, new_cache)`: float32 `[batch, block_len, vocab]` target-aligned
    logits as `diffusion_logits_fn` gives them for these positions, and the
    cache with the committed columns written; its boundary is the last
    committed token.

  Raises:
    ValueError: for ids of the wrong rank, dtype or shape, a batch size that
      differs from the cache's, a `commit_length` outside `[1, block_len]`
      (or any with `canvas_ids`), canvas ids against a cache without
      logits, or (when known) a cache without room.
  """
  tokens, positions, segments = diffusion_lm.check_inputs(
      model,
      block_tokens,
      block_positions,
      block_segment_ids,
      config,
      prefix="block_",
  )
  batch, block_len = tokens.shape
  if canvas_ids is not None:
    if commit_length is not None:
      raise ValueError("canvas_ids columns are never committed.")
    if cache.committed_logits is None and (
        config.alignment == bd_config.SHIFTED
    ):
      raise ValueError(
          "canvas_ids under shifted alignment need a cache made with"
          " keep_logits=True."
      )
    return _canvas_logits(
        model, tokens, positions, segments, cache, config, canvas_ids
    )
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
  cache_batch, cache_size = cache.positions.shape
  if batch != cache_batch:
    raise ValueError(
        f"block_tokens batch size {batch} differs from the cache's"
        f" {cache_batch}."
    )
  end = cache.end_index
  if _is_concrete(end) and int(end) + block_len > cache_size:
    # Tunix would wrap around and overwrite the oldest slots.
    raise ValueError(
        f"the cache has {cache_size - int(end)} free slots, but the block"
        f" has {block_len}; use a larger cache_size."
    )
  kv_positions = jax.lax.dynamic_update_slice(
      cache.positions, positions, (0, end)
  )
  kv_segments = jax.lax.dynamic_update_slice(
      cache.segment_ids, segments, (0, end)
  )
  mask = masks.block_causal_mask(
      positions,
      kv_positions,
      config.block_size,
      q_segment_ids=segments,
      kv_segment_ids=kv_segments,
  )
  raw, new_kv = model(tokens, positions, cache.kv, mask)
  raw = raw.astype(jnp.float32)

  if config.alignment == bd_config.SAME_POSITION:
    logits = raw
  else:
    index, found = alignment.predecessors(positions, segments)
    from_boundary = (
        ~found
        & (segments != masks.PAD_SEGMENT_ID)
        & (cache.boundary_segment_ids[:, None] == segments)
        & (cache.boundary_positions[:, None] == positions - 1)
    )
    logits = jnp.where(
        found[:, :, None],
        alignment.gather_rows(raw, index),
        jnp.where(
            from_boundary[:, :, None], cache.boundary_logits[:, None, :], 0.0
        ),
    )

  new_end = end + commit_length
  committed_logits = cache.committed_logits
  if committed_logits is not None:
    committed_logits = jax.lax.dynamic_update_slice(
        committed_logits, raw, (0, end, 0)
    )
  if commit_length < block_len:
    # Uncommitted slots read as unwritten: masked out, and overwritten by the
    # next call, which writes at the rewound `end_index`.
    written = jnp.arange(cache_size) < new_end
    kv_positions = jnp.where(written, kv_positions, 0)
    kv_segments = jnp.where(written, kv_segments, masks.PAD_SEGMENT_ID)
    new_kv = _rewind(new_kv, cache.kv, commit_length)
  # The new boundary is the last committed token in (segment, position)
  # order; a row without one keeps its old boundary.
  committed = slice(0, commit_length)
  last = alignment.sorted_order(
      positions[:, committed], segments[:, committed]
  )[:, -1:]
  last_segment = jnp.take_along_axis(segments, last, axis=1)[:, 0]
  has_tokens = last_segment != masks.PAD_SEGMENT_ID
  new_cache = BlockCache(
      kv=new_kv,
      positions=kv_positions,
      segment_ids=kv_segments,
      end_index=new_end,
      boundary_logits=jnp.where(
          has_tokens[:, None],
          alignment.gather_rows(raw, last)[:, 0],
          cache.boundary_logits,
      ),
      boundary_positions=jnp.where(
          has_tokens,
          jnp.take_along_axis(positions, last, axis=1)[:, 0],
          cache.boundary_positions,
      ),
      boundary_segment_ids=jnp.where(
          has_tokens, last_segment, cache.boundary_segment_ids
      ),
      canvas_ids=cache.canvas_ids,
      committed_logits=committed_logits,
  )
  return (
      diffusion_lm.exclude_mask_token(logits, config.mask_token_id),
      new_cache,
  )


def _canvas_logits(model, tokens, positions, segments, cache, config, ids):
  """`block_logits_with_cache` of noisy canvases (`canvas_ids`)."""
  ids = masks.check_ids("canvas_ids", ids, tokens.shape)
  end = cache.end_index
  put = lambda x, v: jax.lax.dynamic_update_slice(x, v, (0, end))
  mask = masks.canvas_mask(
      positions,
      put(cache.positions, positions),
      config.block_size,
      q_canvas_ids=ids,
      kv_canvas_ids=put(cache.canvas_ids, ids),
      q_segment_ids=segments,
      kv_segment_ids=put(cache.segment_ids, segments),
  )
  raw, _ = model(tokens, positions, cache.kv, mask)
  raw = raw.astype(jnp.float32)
  if config.alignment == bd_config.SAME_POSITION:
    return diffusion_lm.exclude_mask_token(raw, config.mask_token_id), cache
  index, found = alignment.predecessors(positions, segments, ids)
  # A block's first token: the clean token before it, in the cache.
  cached, in_cache = alignment.locate(
      positions - 1, segments, cache.positions, cache.segment_ids
  )
  logits = jnp.where(
      found[:, :, None],
      alignment.gather_rows(raw, index),
      jnp.where(
          in_cache[:, :, None],
          alignment.gather_rows(cache.committed_logits, cached),
          0.0,
      ),
  )
  return diffusion_lm.exclude_mask_token(logits, config.mask_token_id), cache
