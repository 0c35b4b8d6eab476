# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`diffusion_logits_fn`: the one model contract of every tunix_bd stage.

Any Tunix decoder called as `model(tokens, positions, cache, attention_mask)`
returning `(logits, cache)` (Qwen3, Gemma, Llama, ...) plugs in: this module
only builds masks, calls the model and re-aligns its logits. SFT, denoising,
replay and RL all read target-aligned logits from here, so they do not depend
on the alignment or the canvas layout.

Target-aligned logits: the logit at physical index i predicts the token at i.
Under `shifted` alignment it is the model's raw logit at the token whose
logical position is one less in the same segment, wherever that token sits
physically (left padding, packing and shuffled orders all work). Positions
with no such token (logical position 0, pads, gaps) are undefined; their
logits are 0 everywhere, i.e. uniform over the allowed vocabulary, so they
stay finite, but they must get zero loss weight and never be sampled.

The mask token's logit is always `MASKED_LOGIT`, so every softmax over these
logits gives it probability exactly 0.

The KV-cache functions (`init_block_cache`, `prefill`,
`block_logits_with_cache`) evaluate one block of a canvas against the cached
clean earlier blocks, exactly as the cache-free single-canvas forward would.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd import attention
from tunix_bd.models import bd_config

# The mask token's logit. Finite on purpose: -inf would make `0 * log p` and
# `inf - inf` NaN in losses and their gradients. In float32,
# exp(MASKED_LOGIT - max) is exactly 0 for any real max logit, and
# MASKED_LOGIT is far from the float32 limit (3.4e38).
MASKED_LOGIT = -1e30


def _check_ids(name: str, ids: jax.Array, shape=None) -> jax.Array:
  ids = jnp.asarray(ids)
  if ids.ndim != 2:
    raise ValueError(
        f"{name} must have rank 2 [batch, length], got shape {ids.shape}."
    )
  if not jnp.issubdtype(ids.dtype, jnp.integer):
    raise ValueError(f"{name} must be an integer array, got {ids.dtype}.")
  if shape is not None and ids.shape != tuple(shape):
    raise ValueError(
        f"{name} must have shape {tuple(shape)} (that of the tokens), got"
        f" {ids.shape}."
    )
  return ids.astype(jnp.int32)


def _check_inputs(tokens, positions, segment_ids, config):
  if not isinstance(config, bd_config.BlockDiffusionConfig):
    raise ValueError(
        "config must be a BlockDiffusionConfig, got"
        f" {type(config).__name__}."
    )
  tokens = _check_ids("tokens", tokens)
  positions = _check_ids("positions", positions, tokens.shape)
  if segment_ids is None:
    segment_ids = jnp.ones(tokens.shape, jnp.int32)
  segment_ids = _check_ids("segment_ids", segment_ids, tokens.shape)
  return tokens, positions, segment_ids


def _exclude_mask_token(logits: jax.Array, mask_token_id: int) -> jax.Array:
  if mask_token_id >= logits.shape[-1]:
    raise ValueError(
        f"mask_token_id={mask_token_id} is outside the model's logits"
        f" vocabulary of size {logits.shape[-1]}."
    )
  return logits.at[..., mask_token_id].set(MASKED_LOGIT)


def _gather_rows(values: jax.Array, index: jax.Array) -> jax.Array:
  """`values[b, index[b, i]]` for `[batch, n, vocab]` values."""
  return jnp.take_along_axis(values, index[:, :, None], axis=1)


def _sorted_order(positions, segment_ids) -> jax.Array:
  # Per row: pads (segment 0) first, then each segment by logical position.
  return jnp.lexsort((positions, segment_ids), axis=-1)


def _predecessors(positions, segment_ids) -> tuple[jax.Array, jax.Array]:
  """Finds each token's logical predecessor by sorting, in O(L log L).

  Args:
    positions: int `[batch, length]` logical positions, unique per segment.
    segment_ids: int `[batch, length]`, 0 = pad.

  Returns:
    `(index, found)`, each `[batch, length]`: `index[b, i]` is the physical
    index of the token at logical position `positions[b, i] - 1` in the same
    non-pad segment, valid where `found` is True.
  """
  order = _sorted_order(positions, segment_ids)
  sorted_pos = jnp.take_along_axis(positions, order, axis=1)
  sorted_seg = jnp.take_along_axis(segment_ids, order, axis=1)
  prev = lambda x: jnp.concatenate([x[:, :1], x[:, :-1]], axis=1)
  found_sorted = (
      (jnp.arange(order.shape[1]) > 0)[None, :]
      & (sorted_seg != attention.PAD_SEGMENT_ID)
      & (prev(sorted_seg) == sorted_seg)
      & (prev(sorted_pos) == sorted_pos - 1)
  )
  # The inverse permutation takes sorted-order results back to physical order.
  rank = jnp.argsort(order, axis=1)
  index = jnp.take_along_axis(prev(order), rank, axis=1)
  found = jnp.take_along_axis(found_sorted, rank, axis=1)
  return index, found


def diffusion_logits_fn(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
) -> jax.Array:
  """Target-aligned block-diffusion logits of a canvas, in one forward.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, None, mask)`.
    tokens: int `[batch, length]` noisy canvas (mask ids where corrupted).
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad; None means one segment.
    config: the block-diffusion settings (static under jit).
    clean_tokens: int `[batch, length]` uncorrupted canvas; required by the
      `clean_context` layout, rejected by `single_canvas`.

  Returns:
    float32 `[batch, length, vocab]` target-aligned logits: index i predicts
    the token at i. Shifted alignment: for the first token of a block under
    `clean_context`, the logit comes from the clean copy of the previous
    block, as at inference. The mask column is `MASKED_LOGIT`.

  Raises:
    ValueError: for ids of the wrong rank, dtype or shape (naming the
      argument), a missing or unexpected `clean_tokens`, or a mask id outside
      the model's vocabulary.
  """
  tokens, positions, segment_ids = _check_inputs(
      tokens, positions, segment_ids, config
  )
  length = tokens.shape[1]
  clean_context = config.layout == bd_config.CLEAN_CONTEXT
  if clean_context and clean_tokens is None:
    raise ValueError(
        f"layout={bd_config.CLEAN_CONTEXT!r} needs clean_tokens."
    )
  if not clean_context and clean_tokens is not None:
    raise ValueError(
        f"clean_tokens is only used by layout={bd_config.CLEAN_CONTEXT!r},"
        f" but layout={config.layout!r}."
    )

  if clean_context:
    clean_tokens = _check_ids("clean_tokens", clean_tokens, tokens.shape)
    both_positions, both_segments = attention.clean_context_inputs(
        positions, segment_ids
    )
    mask = attention.clean_context_mask(
        positions, config.block_size, segment_ids=segment_ids
    )
    both_tokens = jnp.concatenate([tokens, clean_tokens], axis=1)
    del both_segments  # The mask carries the segments.
    raw, _ = model(both_tokens, both_positions, None, mask)
  else:
    mask = attention.block_causal_mask(
        positions,
        positions,
        config.block_size,
        q_segment_ids=segment_ids,
        kv_segment_ids=segment_ids,
    )
    raw, _ = model(tokens, positions, None, mask)
  raw = raw.astype(jnp.float32)

  if config.alignment == bd_config.SAME_POSITION:
    logits = raw[:, :length]
  else:
    index, found = _predecessors(positions, segment_ids)
    if clean_context:
      # A block's first token is predicted from the end of the previous
      # block, which is clean when this block is denoised at inference.
      first_of_block = positions % config.block_size == 0
      index = jnp.where(first_of_block, index + length, index)
    logits = jnp.where(found[:, :, None], _gather_rows(raw, index), 0.0)
  return _exclude_mask_token(logits, config.mask_token_id)


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
  """

  kv: dict
  positions: jax.Array
  segment_ids: jax.Array
  end_index: jax.Array
  boundary_logits: jax.Array
  boundary_positions: jax.Array
  boundary_segment_ids: jax.Array


def init_block_cache(
    model,
    batch_size: int,
    cache_size: int,
    *,
    vocab_size: int | None = None,
    dtype: jnp.dtype = jnp.float32,
) -> BlockCache:
  """An empty `BlockCache` over `model.init_cache(batch, cache_size, dtype)`.

  Args:
    model: a Tunix decoder with `init_cache`.
    batch_size: rows, >= 1.
    cache_size: slots, >= 1; at least the total canvas length.
    vocab_size: logits width; None reads `model.config.vocab_size`.
    dtype: the KV dtype passed to `init_cache`.

  Returns:
    The empty cache.

  Raises:
    ValueError: for a non-positive size.
  """
  for name, value in (("batch_size", batch_size), ("cache_size", cache_size)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
  if vocab_size is None:
    vocab_size = model.config.vocab_size
  return BlockCache(
      kv=model.init_cache(batch_size, cache_size, dtype),
      positions=jnp.zeros((batch_size, cache_size), jnp.int32),
      segment_ids=jnp.zeros((batch_size, cache_size), jnp.int32),
      end_index=jnp.zeros((), jnp.int32),
      boundary_logits=jnp.zeros((batch_size, vocab_size), jnp.float32),
      boundary_positions=jnp.full((batch_size,), -1, jnp.int32),
      boundary_segment_ids=jnp.zeros((batch_size,), jnp.int32),
  )


def _is_concrete(*xs) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in xs)


def block_logits_with_cache(
    model,
    block_tokens: jax.Array,
    block_positions: jax.Array,
    block_segment_ids: jax.Array | None,
    cache: BlockCache,
    *,
    config: bd_config.BlockDiffusionConfig,
) -> tuple[jax.Array, BlockCache]:
  """Target-aligned logits of one block against the cached earlier blocks.

  Each row's non-pad tokens must be whole logical blocks (or the final
  partial block), evaluated in order. A denoising step discards the returned
  cache; committing a block evaluates it once more, clean, and keeps it.
  `config.layout` does not matter here: the cache holds clean blocks.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, kv, mask)`.
    block_tokens: int `[batch, block_len]` canvas of the block.
    block_positions: int `[batch, block_len]` logical positions.
    block_segment_ids: int `[batch, block_len]`, 0 = pad; None means all 1.
    cache: the committed earlier blocks.
    config: the block-diffusion settings (static under jit).

  Returns:
    `(logits, new_cache)`: float32 `[batch, block_len, vocab]` target-aligned
    logits as `diffusion_logits_fn` gives them for these positions, and the
    cache with this block committed.

  Raises:
    ValueError: for ids of the wrong rank, dtype or shape, a batch size that
      differs from the cache's, or (when known) a cache without room.
  """
  tokens, positions, segments = _check_inputs(
      block_tokens, block_positions, block_segment_ids, config
  )
  batch, block_len = tokens.shape
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
  mask = attention.block_causal_mask(
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
    index, found = _predecessors(positions, segments)
    from_boundary = (
        ~found
        & (segments != attention.PAD_SEGMENT_ID)
        & (cache.boundary_segment_ids[:, None] == segments)
        & (cache.boundary_positions[:, None] == positions - 1)
    )
    logits = jnp.where(
        found[:, :, None],
        _gather_rows(raw, index),
        jnp.where(
            from_boundary[:, :, None], cache.boundary_logits[:, None, :], 0.0
        ),
    )

  # The new boundary is the last token in (segment, position) order; a row
  # of pads keeps its old boundary.
  last = _sorted_order(positions, segments)[:, -1:]
  last_segment = jnp.take_along_axis(segments, last, axis=1)[:, 0]
  has_tokens = last_segment != attention.PAD_SEGMENT_ID
  new_cache = BlockCache(
      kv=new_kv,
      positions=kv_positions,
      segment_ids=kv_segments,
      end_index=end + block_len,
      boundary_logits=jnp.where(
          has_tokens[:, None], _gather_rows(raw, last)[:, 0], cache.boundary_logits
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
  return _exclude_mask_token(logits, config.mask_token_id), new_cache


def prefill(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    cache: BlockCache,
    *,
    config: bd_config.BlockDiffusionConfig,
) -> BlockCache:
  """Commits the prompt's complete blocks to the cache in one forward.

  A prompt block that is only partly prompt is not prefilled: it is the
  first block to denoise. Left-pad rows by whole blocks so that every row's
  blocks occupy the same physical slots.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, kv, mask)`.
    tokens: int `[batch, prefill_len]` clean prompt tokens.
    positions: int `[batch, prefill_len]` logical positions.
    segment_ids: int `[batch, prefill_len]`, 0 = pad; None means all 1.
    cache: the cache to write into (usually empty).
    config: the block-diffusion settings.

  Returns:
    The cache with these blocks committed and their boundary logits.

  Raises:
    ValueError: as `block_logits_with_cache`, and (for concrete inputs) when
      a row's last prefilled block is incomplete.
  """
  tokens, positions, segment_ids = _check_inputs(
      tokens, positions, segment_ids, config
  )
  if _is_concrete(positions, segment_ids):
    real = segment_ids != attention.PAD_SEGMENT_ID
    last = jnp.max(jnp.where(real, positions, -1), axis=1)
    incomplete = real.any(axis=1) & ((last + 1) % config.block_size != 0)
    if bool(incomplete.any()):
      raise ValueError(
          f"prefill rows {jnp.flatnonzero(incomplete).tolist()} end inside a"
          f" block of size {config.block_size}; prefill only complete blocks."
      )
  _, cache = block_logits_with_cache(
      model, tokens, positions, segment_ids, cache, config=config
  )
  return cache


def log_probs(logits: jax.Array, temperature: float = 1.0) -> jax.Array:
  """Temperature-scaled log-softmax that keeps excluded entries excluded.

  Entries at or below `MASKED_LOGIT` (the mask token) stay at
  `MASKED_LOGIT` at any temperature, so their probability is exactly 0 and
  no value or gradient overflows.

  Args:
    logits: `[..., vocab]` target-aligned logits.
    temperature: a finite number > 0.

  Returns:
    float32 `[..., vocab]` log-probabilities.

  Raises:
    ValueError: for a temperature that is not a finite positive number.
  """
  return jax.nn.log_softmax(_scale(logits, temperature), axis=-1)


def token_log_probs(
    logits: jax.Array, targets: jax.Array, temperature: float = 1.0
) -> jax.Array:
  """`log_probs(logits, temperature)` at `targets`, without `[..., vocab]` out.

  Args:
    logits: `[batch, length, vocab]` target-aligned logits.
    targets: int `[batch, length]` token ids.
    temperature: a finite number > 0.

  Returns:
    float32 `[batch, length]` log-probabilities of the targets.

  Raises:
    ValueError: for a bad temperature or targets of the wrong shape.
  """
  targets = _check_ids("targets", targets, logits.shape[:-1])
  scaled = _scale(logits, temperature)
  picked = jnp.take_along_axis(scaled, targets[..., None], axis=-1)[..., 0]
  return picked - jax.nn.logsumexp(scaled, axis=-1)


def _scale(logits: jax.Array, temperature: float) -> jax.Array:
  if (
      isinstance(temperature, bool)
      or not isinstance(temperature, (int, float, np.integer, np.floating))
      or not 0.0 < temperature < float("inf")
  ):
    raise ValueError(
        f"temperature must be a finite number > 0, got {temperature!r}."
    )
  logits = logits.astype(jnp.float32)
  excluded = logits <= jnp.float32(MASKED_LOGIT)
  if temperature != 1.0:
    logits = logits / temperature
  return jnp.where(excluded, jnp.float32(MASKED_LOGIT), logits)
