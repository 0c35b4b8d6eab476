# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The physical canvas of a decoding call, and what a call moves.

`Layout` is a batch's static geometry, `build_canvas` its initial canvas;
`pack_inputs` / `unpack_inputs` and `pack_outputs` / `unpack_outputs` move
a call's inputs and outputs as one array each way: every host-device
transfer costs a fixed latency (about 0.25 ms on a TPU v5e host), more than
a forward of a small model.

Row r is left-padded by whole blocks so that its first block to denoise
(logical block `P_r // block_size`) sits at physical block `layout.first`
in every row; loop index j is the j-th block each row denoises. Rows whose
prompt ends past `layout.first` start at the prompt block there, with
nothing to denoise in it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import canvases


@dataclasses.dataclass(frozen=True)
class Layout:
  """Static geometry of a batch.

  Attributes:
    block_size: tokens per block.
    first: physical block of loop block 0; the blocks before it are
      prefilled.
    blocks: loop blocks, the most any row's completion spans.
    max_new_tokens: completion positions per row.
  """

  block_size: int
  first: int
  blocks: int
  max_new_tokens: int

  @classmethod
  def create(
      cls, block_size: int, max_prompt_length: int, max_new_tokens: int
  ) -> Layout:
    # The longest row's last block, and the most blocks a completion spans.
    last = (max_prompt_length + max_new_tokens - 1) // block_size
    spans = canvases.num_completion_blocks(block_size, max_new_tokens)
    blocks = min(spans, last + 1)
    return cls(block_size, last + 1 - blocks, blocks, max_new_tokens)

  @property
  def length(self) -> int:
    return (self.first + self.blocks) * self.block_size


def build_canvas(
    prompts: np.ndarray, lengths: np.ndarray, layout: Layout, mask_id: int
) -> dict[str, np.ndarray]:
  """The initial physical canvas and each row's geometry.

  Args:
    prompts: int `[batch, width]` right-padded prompts.
    lengths: int `[batch]` prompt lengths, >= 1 and <= `width`.

  Returns:
    `tokens`, `positions`, `segments` (int32 `[batch, length]`),
    `completion` (bool `[batch, length]`), `first_block` and `num_blocks`
    (int32 `[batch]`: the row's logical block at loop block 0, its first to
    denoise or a prompt block before it, and how many loop blocks it spans)
    and `offsets` (int `[batch]`: the physical index of logical position 0).
  """
  size, total = layout.block_size, layout.max_new_tokens
  first_block = np.minimum(lengths // size, layout.first)
  offsets = (layout.first - first_block) * size
  logical = np.arange(layout.length)[None, :] - offsets[:, None]
  real = (logical >= 0) & (logical < (lengths + total)[:, None])
  completion = real & (logical >= lengths[:, None])
  prompt_at = np.take_along_axis(
      prompts, np.clip(logical, 0, prompts.shape[1] - 1), axis=1
  )
  tokens = np.where(completion, mask_id, np.where(real, prompt_at, 0))
  num_blocks = (lengths + total - 1) // size - first_block + 1
  return dict(
      tokens=tokens.astype(np.int32),
      positions=np.where(real, logical, 0).astype(np.int32),
      segments=real.astype(np.int32),
      completion=completion,
      first_block=first_block.astype(np.int32),
      num_blocks=num_blocks.astype(np.int32),
      offsets=offsets,
  )


# The per-row `[batch, length]` canvas arrays `pack_inputs` sends, in order.
_CANVAS_FIELDS = ("tokens", "positions", "segments", "completion")
# The `decode` outputs, each `[batch, length]`, then the per-row ones.
_OUTPUT_FIELDS = ("canvas", "steps_at", "logp_at")


def pack_inputs(canvas: dict[str, np.ndarray], seeds: np.ndarray) -> np.ndarray:
  """One int32 `[batch, 4 * length + 3]` array of a call's inputs.

  The `build_canvas` arrays of `_CANVAS_FIELDS` side by side, then
  `first_block`, `num_blocks` and the bits of uint32 `[batch]` `seeds`.
  """
  columns = [canvas[name].astype(np.int32) for name in _CANVAS_FIELDS]
  rows = [canvas["first_block"], canvas["num_blocks"]]
  rows.append(np.asarray(seeds, np.uint32).view(np.int32))
  return np.concatenate(columns + [np.stack(rows, axis=1)], axis=1)


def unpack_inputs(packed: jax.Array, length: int):
  """`(inputs, seeds)` of a `pack_inputs` array, inside `decode`."""
  inputs = {
      name: packed[:, i * length : (i + 1) * length]
      for i, name in enumerate(_CANVAS_FIELDS)
  }
  inputs["completion"] = inputs["completion"].astype(bool)
  rows = packed[:, len(_CANVAS_FIELDS) * length :]
  inputs["first_block"], inputs["num_blocks"] = rows[:, 0], rows[:, 1]
  seeds = jax.lax.bitcast_convert_type(rows[:, 2], jnp.uint32)
  return inputs, seeds


def unpack_outputs(packed: np.ndarray, length: int) -> dict[str, np.ndarray]:
  """`decode`'s int32 `[batch, 3 * length + 2]` output as named arrays.

  Returns:
    `canvas`, `steps_at` (int32) and `logp_at` (float32), each `[batch,
    length]`; `num_steps` (int32) and `nonfinite` (bool), each `[batch]`.
  """
  packed = np.asarray(packed)
  out = {
      name: packed[:, i * length : (i + 1) * length]
      for i, name in enumerate(_OUTPUT_FIELDS)
  }
  out["logp_at"] = np.ascontiguousarray(out["logp_at"]).view(np.float32)
  out["num_steps"] = packed[:, -2]
  out["nonfinite"] = packed[:, -1].astype(bool)
  return out


def pack_outputs(carry) -> jax.Array:
  """`decode`'s int32 `[batch, 3 * length + 2]` output (`unpack_outputs`)."""
  logp_bits = jax.lax.bitcast_convert_type(carry.logp_at, jnp.int32)
  per_row = [carry.num_steps, carry.nonfinite.astype(jnp.int32)]
  return jnp.concatenate(
      [carry.canvas, carry.steps_at, logp_bits, jnp.stack(per_row, axis=1)],
      axis=1,
  )
