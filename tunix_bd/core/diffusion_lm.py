# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`diffusion_logits_fn`: the one model contract of every tunix_bd stage.

Any Tunix decoder called as `model(tokens, positions, cache, attention_mask)`
returning `(logits, cache)` (`core.families`) plugs in: this module builds
the masks, calls the model and returns target-aligned logits
(docs/design.md "Target alignment"), the mask token's column at
`MASKED_LOGIT` (probability exactly 0 under any softmax). Consumers take a
`LogitsFn` / `CachedLogitsFn` as a parameter, defaulting to these.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from tunix_bd import compat
from tunix_bd.core import alignment
from tunix_bd.core import bd_config
from tunix_bd.core import families
from tunix_bd.core import masks
from tunix_bd.core import splash_attention

# The mask token's logit. Finite on purpose: -inf would make `0 * log p` and
# `inf - inf` NaN in losses and their gradients. In float32,
# exp(MASKED_LOGIT - max) is exactly 0 for any real max logit, and
# MASKED_LOGIT is far from the float32 limit (3.4e38).
MASKED_LOGIT = -1e30


class LogitsFn(Protocol):
  """A cache-free model call: target-aligned logits of canvases.

  `diffusion_logits_fn` is the implementation over Tunix decoders; see it
  for the arguments. Returns float32 `[batch, length, vocab]`, the mask
  column at `MASKED_LOGIT`.
  """

  def __call__(
      self,
      model: Any,
      tokens: jax.Array,
      positions: jax.Array,
      segment_ids: jax.Array | None,
      *,
      config: bd_config.BlockDiffusionConfig,
      clean_tokens: jax.Array | None = None,
  ) -> jax.Array:
    ...


class CachedLogitsFn(Protocol):
  """A model call on one block against a block KV cache.

  `cached_logits.block_logits_with_cache` is the implementation over Tunix
  decoders; see it for the arguments. Returns `(logits, new_cache)`:
  float32 `[batch, block_len, vocab]` target-aligned logits, equal to the
  cache-free ones for these positions, and the cache with the first
  `commit_length` columns committed.
  """

  def __call__(
      self,
      model: Any,
      block_tokens: jax.Array,
      block_positions: jax.Array,
      block_segment_ids: jax.Array | None,
      cache: Any,
      *,
      config: bd_config.BlockDiffusionConfig,
      commit_length: int | None = None,
      canvas_ids: jax.Array | None = None,
  ) -> tuple[jax.Array, Any]:
    ...


def check_inputs(
    model, tokens, positions, segment_ids, config, prefix="", check_mask=True
):
  """`(tokens, positions, segment_ids)` of a logits call, checked, as int32.

  The model's `config` (if any) is checked for a supported family and RoPE
  base (`families`), flash attention and, with `check_mask` (callers that
  apply no head leave it to whoever applies one), a mask id outside the
  vocabulary. `segment_ids` None means one segment; `prefix` is prepended
  to argument names in error messages.
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
  if (
      check_mask
      and isinstance(vocab_size, int)
      and config.mask_token_id >= vocab_size
  ):
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


def model_rows(model, tokens, positions, kv, mask, hidden=False):
  """`(rows, new_kv)` of a Tunix decoder call: float32 logits, or its final
  hidden states (`compat.final_hidden_states`) with `hidden`."""
  if hidden:
    return compat.final_hidden_states(model, tokens, positions, kv, mask)
  raw, new_kv = model(tokens, positions, kv, mask)
  return raw.astype(jnp.float32), new_kv


def diffusion_logits_fn(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
    attention: str = splash_attention.DENSE,
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
    attention: `dense`, the model's call with a dense mask; `splash`, the
      Splash kernel (`splash_attention`: Qwen3, positions = physical index).

  Returns:
    float32 `[batch, length, vocab]` target-aligned logits: index i predicts
    the token at i. Shifted alignment: for the first token of a block under
    `clean_context`, the logit comes from the clean copy of the previous
    block, as at inference. The mask column is `MASKED_LOGIT`.
  """
  logits = _aligned_rows(
      model,
      tokens,
      positions,
      segment_ids,
      config,
      clean_tokens,
      attention=attention,
  )
  return exclude_mask_token(logits, config.mask_token_id)


def diffusion_hidden_fn(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
    attention: str = splash_attention.DENSE,
) -> jax.Array:
  """Target-aligned final hidden states: `diffusion_logits_fn` before the head.

  `lm_head.dense_logits(lm_head.model_head(model, mask_id), hidden)` is
  `diffusion_logits_fn`'s result (alignment is a row gather; rows without a
  predecessor are 0). Returns `[batch, length, embed]` hidden rows in the
  model's compute dtype.
  """
  # The mask id is checked by whoever applies the head (`lm_head.model_head`):
  # a causal teacher's vocabulary may lack the student's mask token.
  return _aligned_rows(
      model,
      tokens,
      positions,
      segment_ids,
      config,
      clean_tokens,
      check_mask=False,
      attention=attention,
      hidden=True,
  )


def _aligned_rows(
    model,
    tokens,
    positions,
    segment_ids,
    config,
    clean_tokens,
    check_mask=True,
    attention=splash_attention.DENSE,
    hidden=False,
):
  """Target-aligned rows `[batch, length, width]`: the model's float32
  logits, or its final hidden states with `hidden`."""
  splash = splash_attention.check_attention(attention, "attention") == (
      splash_attention.SPLASH
  )
  tokens, positions, segment_ids = check_inputs(
      model, tokens, positions, segment_ids, config, check_mask=check_mask
  )
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
    row_positions, row_segments = masks.clean_context_inputs(
        positions, segment_ids
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
    )
    if not hidden:
      raw = splash_attention.logits(model, raw)
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
    raw, _ = model_rows(model, row_tokens, row_positions, None, mask, hidden)

  if config.alignment == bd_config.SAME_POSITION:
    return raw[:, :length]
  index, found = alignment.predecessors(positions, segment_ids)
  if clean_context:
    # A block's first token is predicted from the end of the previous
    # block, which is clean when this block is denoised at inference.
    first_of_block = positions % config.block_size == 0
    index = jnp.where(first_of_block, index + length, index)
  return jnp.where(found[:, :, None], alignment.gather_rows(raw, index), 0)
