# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one model contract of every tunix_bd stage: rows of a canvas.

`diffusion_rows` builds the masks, calls a Tunix decoder of a supported
family (`core.families`) and returns target-aligned rows (`lm_head.Rows`,
docs/design.md "Target alignment"), the mask token's logit at
`MASKED_LOGIT`; `diffusion_logits_fn` is their dense logits. Consumers take
a `RowsFn` / `CachedRowsFn` as a parameter; one returning logits (injected)
works with every consumer, the chunked head included.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import families
from tunix_bd.core import layer_scan
from tunix_bd.core import lm_head
from tunix_bd.core import masks
from tunix_bd.core import scoring
from tunix_bd.core import splash_attention

MASKED_LOGIT = scoring.MASKED_LOGIT


# A cache-free model call with `diffusion_rows`' arguments returning rows:
# its `lm_head.Rows`, or float32 `[batch, length, vocab]` target-aligned
# logits (the mask column at `MASKED_LOGIT`), which consumers take as rows
# (`lm_head.as_rows`).
RowsFn = Callable[..., Any]
# A model call on one block against a block KV cache with
# `cached_logits.block_rows_with_cache`'s arguments: `(rows, new_cache)`,
# the rows (`lm_head.Rows`, or logits) equal to the cache-free ones for
# these positions and the cache with the first `commit_length` columns
# committed.
CachedRowsFn = Callable[..., tuple[Any, Any]]


def check_inputs(model, tokens, positions, segment_ids, config, prefix=""):
  """`(tokens, positions, segment_ids)` of a model call, checked, as int32.

  The model's `config` (if any) is checked for a supported family and RoPE
  base (`families`), flash attention and a mask id outside the vocabulary.
  `segment_ids` None means one segment; `prefix` is prepended to argument
  names in error messages.
  """
  if not isinstance(config, bd_config.BlockDiffusionConfig):
    raise ValueError(
        f"config must be a BlockDiffusionConfig, got {type(config).__name__}."
    )
  model_config = getattr(model, "config", None)
  if model_config is not None:
    families.family(model_config)  # Fails closed outside the families.
  if getattr(model_config, "use_flash_attention", False):
    # Tunix's Splash path ignores the mask passed in: it would be causal.
    raise ValueError(
        "the model has use_flash_attention=True, whose kernel ignores the"
        " block-diffusion mask; set use_flash_attention=False."
    )
  # Models with a config fail before any compute; others once the logits'
  # width is known (`exclude_mask_token`).
  vocab_size = getattr(model_config, "vocab_size", None)
  if isinstance(vocab_size, int) and config.mask_token_id >= vocab_size:
    raise ValueError(
        f"mask_token_id={config.mask_token_id} is outside the model"
        f" vocabulary of size {vocab_size}."
    )
  tokens = masks.check_ids(f"{prefix}tokens", tokens)
  positions = masks.check_ids(f"{prefix}positions", positions, tokens.shape)
  if segment_ids is None:
    segment_ids = jnp.ones(tokens.shape, jnp.int32)
  segment_ids = masks.check_ids(
      f"{prefix}segment_ids", segment_ids, tokens.shape
  )
  return tokens, positions, segment_ids


def exclude_mask_token(logits: jax.Array, mask_token_id: int) -> jax.Array:
  """Sets the mask column to `MASKED_LOGIT`; checks that it exists."""
  if mask_token_id >= logits.shape[-1]:
    raise ValueError(
        f"mask_token_id={mask_token_id} is outside the model's logits"
        f" vocabulary of size {logits.shape[-1]}."
    )
  return logits.at[..., mask_token_id].set(MASKED_LOGIT)


def forward(
    model, tokens, positions, kv, mask, hidden_states: bool, scan_layers=False
):
  """`(values, new_kv)` of a Tunix decoder call: its final hidden states
  (`compat.final_hidden_states`) if `hidden_states` (its head split off:
  `lm_head.split_head`), else its float32 logits. Its layers run in one
  scan (`layer_scan.scanned`) on a stacked cache (`layer_scan.stack_cache`),
  and without a cache with `scan_layers` where they can."""
  if layer_scan.is_stacked(kv):
    call = lambda model, kv: forward(
        model, tokens, positions, kv, mask, hidden_states
    )
    return layer_scan.call_stacked(model, kv, call)
  if kv is None and scan_layers:
    model = layer_scan.scanned(model)
  if hidden_states:
    return compat.final_hidden_states(model, tokens, positions, kv, mask)
  raw, new_kv = model(tokens, positions, kv, mask)
  return raw.astype(jnp.float32), new_kv


def rows_of(values, head, mask_token_id) -> lm_head.Rows:
  """Aligned `values` as `Rows`: logits get the mask column excluded."""
  if head is None:
    values = exclude_mask_token(values, mask_token_id)
  return lm_head.Rows(values, head)


# Under `shifted` alignment the logit at position p comes from the token at
# position p - 1 of the same segment (and canvas), wherever it sits
# physically; these helpers find it by sorting, O(L log L).


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
  """Each token's logical predecessor: `(index, found)`, `[batch, length]`.

  `index[b, i]` is the physical index of the token at logical position
  `positions[b, i] - 1` in the same non-pad segment (and canvas, if
  `canvas_ids` is given), valid where `found`. All inputs are int `[batch,
  length]`, positions unique per segment (and canvas).
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


def diffusion_rows(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
    attention: str = splash_attention.DENSE,
    scan_layers: bool = False,
) -> lm_head.Rows:
  """Target-aligned block-diffusion rows of a canvas, in one forward.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, None, mask)`.
    tokens: int `[batch, length]` noisy canvas (mask ids where corrupted).
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad; None means one segment.
    config: the block-diffusion settings (static under jit).
    clean_tokens: int `[batch, length]` uncorrupted canvas; required by the
      `clean_context` layout, rejected by `single_canvas`.
    attention: `dense`, the model's call with a dense mask; `splash`, the
      Splash kernel (`splash_attention`: Qwen3, positions the physical
      index up to a block-aligned shift per segment).
    scan_layers: run a Tunix decoder's layers in one scan, compiled once
      (`layer_scan`); False, Tunix's Python loop over them. Equal values.

  Returns:
    `lm_head.Rows` `[batch, length, ...]`, index i predicting the token at
    i: the model's final hidden rows and head (`lm_head.split_head`), or
    its float32 logits. Shifted alignment: for the first token of a block
    under `clean_context`, the row comes from the clean copy of the
    previous block, as at inference; rows without a predictor are 0.
  """
  splash = splash_attention.check_attention(attention, "attention") == (
      splash_attention.SPLASH
  )
  tokens, positions, segment_ids = check_inputs(
      model, tokens, positions, segment_ids, config
  )
  head = lm_head.split_head(model, config.mask_token_id)
  length = tokens.shape[1]
  clean_context = config.layout == bd_config.CLEAN_CONTEXT
  if clean_context and clean_tokens is None:
    raise ValueError(f"layout={bd_config.CLEAN_CONTEXT!r} needs clean_tokens.")
  if not clean_context and clean_tokens is not None:
    raise ValueError(
        f"clean_tokens is only used by layout={bd_config.CLEAN_CONTEXT!r},"
        f" but layout={config.layout!r}."
    )

  if clean_context:
    clean_tokens = masks.check_ids("clean_tokens", clean_tokens, tokens.shape)
    # Both copies share positions (and segments).
    row_tokens = jnp.concatenate([tokens, clean_tokens], axis=1)
    row_positions, row_segments = (
        jnp.concatenate([x, x], axis=1) for x in (positions, segment_ids)
    )
  else:
    row_tokens, row_positions, row_segments = tokens, positions, segment_ids
  if splash:
    raw = splash_attention.hidden_states(
        model,
        row_tokens,
        row_positions,
        row_segments,
        block_size=config.block_size,
        clean_context=clean_context,
        scan_layers=scan_layers,
    )
    if head is None:  # Tunix Qwen3's head, with its LoRA adapters.
      tied = model.config.use_tied_embedding
      raw = (model.embedder.decode if tied else model.lm_head)(raw)
      raw = raw.astype(jnp.float32)
  else:
    if clean_context:
      mask = masks.clean_context_mask(
          positions, config.block_size, segment_ids=segment_ids
      )
    else:
      mask = masks.block_causal_mask(
          positions,
          positions,
          config.block_size,
          q_segment_ids=segment_ids,
          kv_segment_ids=segment_ids,
      )
    raw, _ = forward(
        model,
        row_tokens,
        row_positions,
        None,
        mask,
        hidden_states=head is not None,
        scan_layers=scan_layers,
    )

  if config.alignment == bd_config.SAME_POSITION:
    rows = raw[:, :length]
  else:
    index, found = predecessors(positions, segment_ids)
    if clean_context:
      # A block's first token is predicted from the end of the previous
      # block, which is clean when this block is denoised at inference.
      first_of_block = positions % config.block_size == 0
      index = jnp.where(first_of_block, index + length, index)
    rows = jnp.where(found[:, :, None], gather_rows(raw, index), 0)
  return rows_of(rows, head, config.mask_token_id)


def diffusion_logits_fn(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
    attention: str = splash_attention.DENSE,
    scan_layers: bool = False,
) -> jax.Array:
  """float32 `[batch, length, vocab]` logits of `diffusion_rows` (same
  arguments): target-aligned, the mask column `MASKED_LOGIT`, 0 where a
  position has no predictor."""
  return lm_head.dense_logits(
      diffusion_rows(
          model,
          tokens,
          positions,
          segment_ids,
          config=config,
          clean_tokens=clean_tokens,
          attention=attention,
          scan_layers=scan_layers,
      )
  )
