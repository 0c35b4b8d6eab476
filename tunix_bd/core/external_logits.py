# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Tunix `DiffusionLogitsFn` as tunix_bd's model call, cache-free.

`model_calls(fn)` makes a callable `fn(model, model_inputs) -> [batch,
length, vocab]` target-aligned logits tunix_bd's model call, so a model
integration written for Tunix's diffusion contract decodes, rolls out,
replays and distils without tunix_bd model code (docs/design.md "A model
call brought as a Tunix `DiffusionLogitsFn`"):

    Denoiser(model, bd=bd, config=config, **external_logits.model_calls(fn))
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import masks

# What `fn` is given, beside `clean_tokens` under the `clean_context` layout.
MODEL_INPUTS = ("tokens", "positions", "segment_ids")


@dataclasses.dataclass(frozen=True)
class DiffusionLogitsAdapter:
  """A `DiffusionLogitsFn` as a tunix_bd `LogitsFn` (hashable, jit-static)."""

  fn: Callable[[Any, Any], jax.Array]

  def __call__(
      self,
      model,
      tokens: jax.Array,
      positions: jax.Array,
      segment_ids: jax.Array | None,
      *,
      config: bd_config.BlockDiffusionConfig,
      clean_tokens: jax.Array | None = None,
  ) -> jax.Array:
    """float32 logits of `fn`, its mask column `MASKED_LOGIT`."""
    tokens, positions, segment_ids = diffusion_lm.check_inputs(
        model, tokens, positions, segment_ids, config
    )
    inputs = dict(tokens=tokens, positions=positions, segment_ids=segment_ids)
    if clean_tokens is not None:
      inputs["clean_tokens"] = masks.check_ids(
          "clean_tokens", clean_tokens, tokens.shape
      )
    logits = jnp.asarray(self.fn(model, inputs))
    if logits.ndim != 3 or logits.shape[:2] != tokens.shape:
      raise ValueError(
          f"the DiffusionLogitsFn returned logits of shape {logits.shape};"
          f" want [batch, length, vocab] with [batch, length] {tokens.shape}."
      )
    return diffusion_lm.exclude_mask_token(
        logits.astype(jnp.float32), config.mask_token_id
    )


@dataclasses.dataclass(frozen=True)
class CacheFree:
  """The cached model call of a model without a KV cache.

  Passed as `cached_logits_fn`, it makes decoding cache-free and replay
  score each canvas with `logits_fn` in a forward of its own. It is never
  called with a cache.
  """

  logits_fn: diffusion_lm.RowsFn

  def __call__(self, *args, **kwargs):
    del args, kwargs
    raise ValueError(
        "this model call has no KV cache (CacheFree); decode cache-free and"
        " replay with core.replay, which score single canvases."
    )


def model_calls(fn: Callable[[Any, Any], jax.Array]) -> dict[str, Any]:
  """`logits_fn` and `cached_logits_fn` keywords for a `DiffusionLogitsFn`
  (replay takes `cached_logits_fn` only)."""
  logits_fn = DiffusionLogitsAdapter(fn)
  return dict(logits_fn=logits_fn, cached_logits_fn=CacheFree(logits_fn))


def replay_cache_free(model, trace, context, packed, config, fn, per_slot):
  """`replay._replay` through `fn`, a `CacheFree`: one forward per canvas.

  Canvas c of each row is scored on a single canvas in logical order: the
  clean blocks before its block, its block, then pads; what the cached
  denoiser saw, and under block-causal attention (later blocks unseen) what
  the cache-free one saw. Canvases past every row's last are skipped.
  """
  size = config.block_size
  batch = context.tokens.shape[0]
  # One block past the clean context: the last block's canvas.
  length = context.tokens.shape[1] + size
  position = jnp.arange(length, dtype=jnp.int32)
  position = jnp.broadcast_to(position, (batch, length))
  clean = [
      jnp.pad(x, ((0, 0), (0, size)))
      for x in (context.tokens, context.segment_ids)
  ]
  row = jnp.broadcast_to(jnp.arange(batch)[:, None], (batch, size))

  def canvas_values(c):
    """`per_slot` of canvas c's block, where it goes, and the head `fn`
    split off its rows (or None)."""
    cols = lambda x: jax.lax.dynamic_slice_in_dim(x, c * size, size, axis=1)
    start = jnp.max(cols(packed.positions), axis=1, keepdims=True)
    start = start // size * size
    offset = position - start
    here, before = (offset >= 0) & (offset < size), offset < 0
    index = jnp.clip(offset, 0, size - 1)
    tokens, segments = (
        jnp.where(
            here,
            jnp.take_along_axis(cols(x), index, axis=1),
            jnp.where(before, whole, 0),
        )
        for x, whole in zip((packed.tokens, packed.segment_ids), clean)
    )
    rows = lm_head.as_rows(
        fn.logits_fn(model, tokens, position, segments, config=config)
    )
    block = rows.map(
        lambda x: jnp.take_along_axis(
            x, (start + jnp.arange(size))[:, :, None], axis=1
        )
    )
    values = per_slot(
        block, cols(packed.targets), temperature=trace.temperature
    )
    scored = cols(packed.scored)
    scored = scored.reshape(scored.shape + (1,) * (values.ndim - 2))
    return jnp.where(scored, values, 0.0), cols(packed.slot), rows.head

  # The head's structure (None or not) is static: traced shapes suffice.
  values, _, head = jax.eval_shape(canvas_values, 0)
  zeros = jnp.zeros(np.shape(trace.tokens) + values.shape[2:], jnp.float32)

  @functools.partial(jax.checkpoint, prevent_cse=False)
  def score(c):
    values, slot, _ = canvas_values(c)
    return zeros.at[row, slot].add(values)

  def body(total, c):
    occupied = jax.lax.dynamic_slice_in_dim(
        packed.segment_ids, c * size, size, axis=1
    ).any()
    return total + jax.lax.cond(occupied, score, lambda _: zeros, c), None

  canvases = jnp.arange(packed.tokens.shape[1] // size)
  total, _ = jax.lax.scan(body, zeros, canvases)
  return total, head is not None
