# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Test-only: the single-canvas block-causal mask as a TPU Splash mask object.

No product path uses it (flash attention is refused), but invariant 1 of
docs/design.md keeps it equal to the dense
`tunix_bd.core.masks.block_causal_mask`, so a Splash path can be added
without re-deriving the mask.
"""

from __future__ import annotations

from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask_lib
import numpy as np
from tunix_bd import config_utils


class BlockCausalSplashMask(splash_mask_lib._ComputableMask):  # pylint: disable=protected-access
  """Lazy single-canvas block-causal mask for the TPU Splash kernel.

  It covers canonical positions only: query i has position `i + offset` and
  key j has position `j`. Segments go to the kernel separately as splash
  `SegmentIds`, which match equal ids: pad-to-pad attention is allowed there,
  and a packed document's blocks line up only if it starts at a multiple of
  `block_size`. Rows whose logical positions are not canonical (left padding,
  other packing, context-parallel load balancing) must use the dense
  `block_causal_mask`. With shape (4, 4) and block size 2:

      1 1 0 0
      1 1 0 0
      1 1 1 1
      1 1 1 1

  Attributes:
    block_size: number of tokens per block.
    offset: position of query 0 relative to key 0 (e.g. the cache length when
      the queries are the current block).
  """

  block_size: int
  offset: int

  def __init__(
      self,
      shape: tuple[int, int],
      block_size: int,
      offset: int = 0,
      shard_count: int = 1,
  ):
    """Builds the mask.

    Args:
      shape: `(q_len, kv_len)`, both >= 1.
      block_size: number of tokens per block, >= 1.
      offset: position of query 0; a non-negative int.
      shard_count: as for splash's `CausalMask`.

    Raises:
      ValueError: for a bad `shape`, `block_size` or `offset`.
    """
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
      raise ValueError(f"shape must be (q_len, kv_len), got {shape!r}.")
    q_len = config_utils.check_int("shape[0] (q_len)", shape[0], 1)
    kv_len = config_utils.check_int("shape[1] (kv_len)", shape[1], 1)
    self.block_size = block_size = config_utils.check_int(
        "block_size", block_size, 1
    )
    self.offset = offset = config_utils.check_int("offset", offset, 0)

    # Runs on NumPy slices when splash builds its block map, and on int32
    # iotas inside the kernel.
    def block_causal_mask_function(q_ids, kv_ids):
      if offset:
        q_ids = q_ids + offset
      return q_ids // block_size >= kv_ids // block_size

    super().__init__(
        shape=(q_len, kv_len),
        mask_function=block_causal_mask_function,
        shard_count=shard_count,
    )

  def __eq__(self, other: object):
    if not isinstance(other, type(self)):
      return NotImplemented
    return (
        self.shape == other.shape
        and self.block_size == other.block_size
        and self.offset == other.offset
        and np.array_equal(self.q_sequence, other.q_sequence)
    )

  def __hash__(self):
    # Splash caches processed masks by hash across layers.
    return hash((
        type(self),
        self.shape,
        self.block_size,
        self.offset,
        self.q_sequence.tobytes(),
    ))


def make_splash_multi_head_mask(
    num_heads: int, seq_len: int, block_size: int, *, shard_count: int = 1
) -> splash_mask_lib.MultiHeadMask:
  """A `[num_heads, seq_len, seq_len]` block-causal mask for `make_splash_mha`.

  Every head shares one `BlockCausalSplashMask`, so splash computes the mask
  in the kernel instead of loading it. Canonical positions only (see
  `BlockCausalSplashMask`).

  Args:
    num_heads: number of query heads, >= 1.
    seq_len: query and key length, >= 1.
    block_size: number of tokens per block, >= 1.
    shard_count: as for splash's `CausalMask`.

  Returns:
    The multi-head mask.

  Raises:
    ValueError: for a bad `num_heads`, `seq_len` or `block_size`.
  """
  num_heads = config_utils.check_int("num_heads", num_heads, 1)
  seq_len = config_utils.check_int("seq_len", seq_len, 1)
  mask = BlockCausalSplashMask(
      (seq_len, seq_len), block_size, shard_count=shard_count
  )
  return splash_mask_lib.MultiHeadMask([mask] * num_heads)
