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
from typing import Any, Callable

import jax
import jax.numpy as jnp
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import masks

# What `fn` is given, beside `clean_tokens` under the `clean_context` layout.
MODEL_INPUTS = ("tokens", "positions", "segment_ids")


@dataclasses.dataclass(frozen=True)
class DiffusionLogitsAdapter:
  """A `DiffusionLogitsFn` as a tunix_bd `RowsFn` (hashable, jit-static)."""

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
