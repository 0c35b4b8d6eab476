# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The state of an exact block KV cache for block-diffusion decoding.

Under the block-causal mask a block attends only to earlier blocks and to
itself, so the keys and values of committed (clean) blocks can be cached.
`BlockCache` holds the model's KV cache plus what masks and the shifted
alignment need; `cached_logits.block_rows_with_cache` (the default
`CachedRowsFn`) evaluates blocks against it and commits them.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
from tunix_bd import config_utils
from tunix_bd.core import families
from tunix_bd.core import layer_scan
from tunix_bd.core import lm_head


@flax.struct.dataclass
class BlockCache:
  """A model KV cache of committed blocks plus what masks and shifts need.

  Slots `[0, end_index)` hold committed tokens; a block call writes its own
  slots `[end_index, end_index + block_len)` before attending.

  Attributes:
    kv: the model's own cache (`model.init_cache(...)`), or it stacked
      (`layer_scan.stack_cache`); Tunix models write at their per-layer
      `end_index`, which advances in step with ours.
    positions: int32 `[batch, cache_size]` logical positions of the slots.
    segment_ids: int32 `[batch, cache_size]`, 0 = pad or not yet written.
    end_index: int32 scalar, the number of committed slots.
    boundary_rows: float32 `[batch, width]` raw row (hidden state or
      logits, as the model call's rows: `lm_head.split_head`) at each row's
      last committed token (the shifted-alignment predictor of the next
      block's first token); zeros if none.
    boundary_positions: int32 `[batch]` logical position of that token, -1
      if none.
    boundary_segment_ids: int32 `[batch]` its segment id, 0 if none.
    block_end_rows: float32 `[batch, cache_size // S + 1, width]` raw row
      at the last token of each committed logical block (S the block size),
      the predictor of the next block's first token, kept only by a cache
      made with `block_end_rows_of=S` (packed canvases read it); else None.
    block_end_segments: int32 `[batch, cache_size // S + 1]` the segment id
      of each kept block end, 0 if none; None with `block_end_rows`.
  """

  kv: dict
  positions: jax.Array
  segment_ids: jax.Array
  end_index: jax.Array
  boundary_rows: jax.Array
  boundary_positions: jax.Array
  boundary_segment_ids: jax.Array
  block_end_rows: jax.Array | None
  block_end_segments: jax.Array | None


def init_block_cache(
    model,
    batch_size: int,
    cache_size: int,
    *,
    block_end_rows_of: int | None = None,
    scan_layers: bool = False,
) -> BlockCache:
  """An empty `BlockCache` over the model's empty KV cache (Qwen3 builds
  it in its compute dtype, the others in float32).

  Args:
    cache_size: slots; at least the total canvas length.
    block_end_rows_of: a block size S: also keep the raw row at the end
      of every committed block (memory `[batch, cache_size // S + 1,
      width]`), for `canvas_ids` calls; None keeps none.
    scan_layers: keep the KV cache stacked (`layer_scan.stack_cache`), so
      that the default model calls run the layers in one scan, where the
      model's layers scan (`layer_scan.scanned`); else Tunix's layout.

  The rows kept are `config.embed_dim` wide where the model's head is split
  off its rows (`lm_head.split_head`), else `config.vocab_size`.
  """
  for name, value in (("batch_size", batch_size), ("cache_size", cache_size)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
  config = model.config
  families.family(config)  # Fails closed outside the supported families.
  if hasattr(model, "init_cache"):  # Qwen3 builds its own.
    kv = model.init_cache(batch_size, cache_size, jnp.float32)
  else:
    # Qwen2 and Llama 3 read Tunix's per-layer layout but do not build it.
    shape = (batch_size, cache_size, config.num_kv_heads, config.head_dim)
    kv = {
        f"layer_{i}": {
            "k": jnp.zeros(shape, jnp.float32),
            "v": jnp.zeros(shape, jnp.float32),
            "end_index": jnp.zeros((batch_size,), jnp.int32),
        }
        for i in range(config.num_layers)
    }
  config_utils.check_bool("scan_layers", scan_layers)
  if scan_layers and layer_scan.can_scan(model):
    kv = layer_scan.stack_cache(kv)
  hidden = lm_head.split_head(model) is not None
  width = config.embed_dim if hidden else config.vocab_size
  ends = None
  if block_end_rows_of is not None:
    size = config_utils.check_int("block_end_rows_of", block_end_rows_of, 1)
    ends = (batch_size, cache_size // size + 1)
  return BlockCache(
      kv=kv,
      positions=jnp.zeros((batch_size, cache_size), jnp.int32),
      segment_ids=jnp.zeros((batch_size, cache_size), jnp.int32),
      end_index=jnp.zeros((), jnp.int32),
      boundary_rows=jnp.zeros((batch_size, width), jnp.float32),
      boundary_positions=jnp.full((batch_size,), -1, jnp.int32),
      boundary_segment_ids=jnp.zeros((batch_size,), jnp.int32),
      block_end_rows=None if ends is None else jnp.zeros(ends + (width,)),
      block_end_segments=(None if ends is None else jnp.zeros(ends, jnp.int32)),
  )
