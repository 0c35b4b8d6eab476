# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`diffusion_logits_fn`: the one model contract of every tunix_bd stage.

Any Tunix decoder called as `model(tokens, positions, cache, attention_mask)`
returning `(logits, cache)` (Qwen3, Qwen2, Llama 3; see `models.families`)
plugs in: this module only builds masks, calls the model and re-aligns its
logits. SFT, denoising, replay and RL all read target-aligned logits through
a `LogitsFn` (cache-free) or a `CachedLogitsFn` (block KV cache), defaulting
to `diffusion_logits_fn` and `block_cache.block_logits_with_cache`; each
consumer takes them as parameters, so another model call (a biased one in a
test, a teacher, a served model) plugs in without touching the consumers.
`log_probs` is the one temperature-scaled log-softmax: rollout commits,
recorded log-probs and replay all use it.

Target-aligned logits: the logit at physical index i predicts the token at i.
Under `shifted` alignment it is the model's raw logit at the token whose
logical position is one less in the same segment, wherever that token sits
physically (left padding, packing and shuffled orders all work). Positions
with no such token (logical position 0, pads, gaps) are undefined; their
logits are 0 everywhere, i.e. uniform over the allowed vocabulary, so they
stay finite, but they must get zero loss weight and never be sampled.

The mask token's logit is always `MASKED_LOGIT`, so every softmax over these
logits gives it probability exactly 0.

The KV-cache path (`tunix_bd.core.block_cache`) evaluates one block at a
time against cached clean blocks with the helpers marked "shared" here, so
both paths align logits in exactly one way.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import families
from tunix_bd.core import masks

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
      clean_positions: jax.Array | None = None,
      clean_segment_ids: jax.Array | None = None,
      canvas_ids: jax.Array | None = None,
  ) -> jax.Array:
    ...


class CachedLogitsFn(Protocol):
  """A model call on one block against a block KV cache.

  `block_cache.block_logits_with_cache` is the implementation over Tunix
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


def check_temperature(temperature: Any, name: str = "temperature") -> float:
  """A static temperature as a float; fails closed unless finite and > 0."""
  if isinstance(temperature, jax.core.Tracer):
    raise ValueError(
        f"{name} must be a static number, got a traced value; keep it out of"
        " jit arguments."
    )
  if isinstance(temperature, (np.ndarray, jax.Array)) and temperature.ndim:
    raise ValueError(f"{name} must be a scalar, got {temperature!r}.")
  try:
    value = float(temperature)
  except (TypeError, ValueError):
    value = float("nan")
  if isinstance(temperature, bool) or not 0.0 < value < float("inf"):
    raise ValueError(f"{name} must be a finite number > 0, got {temperature!r}.")
  return value


def check_inputs(model, tokens, positions, segment_ids, config, prefix=""):
  """Validates the common inputs (shared); `prefix` names the argument.

  Args:
    model: the decoder; its `config` (if any) is checked for a supported
      family (`families`), flash attention and a mask id outside the
      vocabulary.
    tokens: int `[batch, length]` ids.
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad; None means one segment.
    config: the `BlockDiffusionConfig`.
    prefix: prepended to argument names in error messages.

  Returns:
    `(tokens, positions, segment_ids)` as int32 arrays.

  Raises:
    ValueError: for a wrong config type, an unsupported model family, flash
      attention, a mask id outside the model vocabulary, or ids of the wrong
      rank, dtype or shape.
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
  """Sets the mask column to `MASKED_LOGIT` (shared); checks it exists."""
  if mask_token_id >= logits.shape[-1]:
    raise ValueError(
        f"mask_token_id={mask_token_id} is outside the model's logits"
        f" vocabulary of size {logits.shape[-1]}."
    )
  return logits.at[..., mask_token_id].set(MASKED_LOGIT)


def gather_rows(values: jax.Array, index: jax.Array) -> jax.Array:
  """`values[b, index[b, i]]` for `[batch, n, vocab]` values (shared)."""
  return jnp.take_along_axis(values, index[:, :, None], axis=1)


def sorted_order(positions, segment_ids, canvas_ids=None) -> jax.Array:
  """Per-row order (shared): pads first, then by (canvas, segment, position)."""
  if canvas_ids is None:
    return jnp.lexsort((positions, segment_ids), axis=-1)
  return jnp.lexsort((positions, segment_ids, canvas_ids), axis=-1)


def predecessors(
    positions, segment_ids, canvas_ids=None
) -> tuple[jax.Array, jax.Array]:
  """Finds each token's logical predecessor by sorting (shared), O(L log L).

  Args:
    positions: int `[batch, length]` logical positions, unique per segment
      (and canvas).
    segment_ids: int `[batch, length]`, 0 = pad.
    canvas_ids: int `[batch, length]` or None; the predecessor must be in
      the same canvas.

  Returns:
    `(index, found)`, each `[batch, length]`: `index[b, i]` is the physical
    index of the token at logical position `positions[b, i] - 1` in the same
    non-pad segment (and canvas), valid where `found` is True.
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


def locate(
    q_positions, q_segment_ids, kv_positions, kv_segment_ids
) -> tuple[jax.Array, jax.Array]:
  """Where each query's (segment, position) sits among the keys, O(L log L).

  Args:
    q_positions: int `[batch, q_len]` logical positions to look up.
    q_segment_ids: int `[batch, q_len]`, 0 = pad (never found).
    kv_positions: int `[batch, kv_len]` positions, unique per segment.
    kv_segment_ids: int `[batch, kv_len]`, 0 = pad (never matched).

  Returns:
    `(index, found)`, each `[batch, q_len]`: the physical key index with the
    same non-pad segment and position, valid where `found` is True.
  """
  stride = jnp.maximum(jnp.max(kv_positions), jnp.max(q_positions)) + 1
  key = lambda pos, seg: jnp.where(
      seg != masks.PAD_SEGMENT_ID, seg * stride + pos, -1
  )
  kv_key, q_key = key(kv_positions, kv_segment_ids), key(q_positions, q_segment_ids)
  order = jnp.argsort(kv_key, axis=1)
  sorted_key = jnp.take_along_axis(kv_key, order, axis=1)
  slot = jax.vmap(jnp.searchsorted)(sorted_key, q_key)
  slot = jnp.minimum(slot, kv_key.shape[1] - 1)
  found = (jnp.take_along_axis(sorted_key, slot, axis=1) == q_key) & (
      q_key >= 0
  )
  return jnp.take_along_axis(order, slot, axis=1), found


def diffusion_logits_fn(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array | None,
    *,
    config: bd_config.BlockDiffusionConfig,
    clean_tokens: jax.Array | None = None,
    clean_positions: jax.Array | None = None,
    clean_segment_ids: jax.Array | None = None,
    canvas_ids: jax.Array | None = None,
) -> jax.Array:
  """Target-aligned block-diffusion logits of canvases, in one forward.

  `single_canvas`: one forward over `tokens` with the block-causal mask.
  `clean_context`: one forward over `[tokens ; clean_tokens]` with
  `masks.canvas_mask`: each noisy canvas sees the clean context's earlier
  blocks and itself. By default the clean context is a clean copy of the
  canvas (same positions and segments) and every block is its own canvas
  (the BD3-LM training layout); packed replay passes its own clean context
  and canvas ids to score many canvases of one block side by side.

  Args:
    model: a Tunix decoder called as `model(tokens, positions, None, mask)`.
    tokens: int `[batch, length]` noisy canvas (mask ids where corrupted).
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad; None means one segment.
    config: the block-diffusion settings (static under jit).
    clean_tokens: int `[batch, clean_len]` uncorrupted context; required by
      the `clean_context` layout, rejected by `single_canvas`.
    clean_positions: int `[batch, clean_len]` its positions; None: those of
      the canvas (then `clean_len == length`).
    clean_segment_ids: int `[batch, clean_len]` its segments; None: those of
      the canvas.
    canvas_ids: int `[batch, length]` ids >= 1 of the noisy canvases (one
      block each); None: one canvas per block.

  Returns:
    float32 `[batch, length, vocab]` target-aligned logits: index i predicts
    the token at i. Shifted alignment: for the first token of a block under
    `clean_context`, the logit comes from the clean context's previous
    token, as at inference. The mask column is `MASKED_LOGIT`.

  Raises:
    ValueError: for ids of the wrong rank, dtype or shape (naming the
      argument), a missing or unexpected clean context, or a mask id outside
      the model's vocabulary.
  """
  tokens, positions, segment_ids = check_inputs(
      model, tokens, positions, segment_ids, config
  )
  length = tokens.shape[1]
  clean_context = config.layout == bd_config.CLEAN_CONTEXT
  extras = (clean_tokens, clean_positions, clean_segment_ids, canvas_ids)
  if clean_context and clean_tokens is None:
    raise ValueError(f"layout={bd_config.CLEAN_CONTEXT!r} needs clean_tokens.")
  if not clean_context and any(x is not None for x in extras):
    raise ValueError(
        "clean_tokens, clean_positions, clean_segment_ids and canvas_ids are"
        f" only used by layout={bd_config.CLEAN_CONTEXT!r}, but"
        f" layout={config.layout!r}."
    )
  if not clean_context:
    mask = masks.block_causal_mask(
        positions,
        positions,
        config.block_size,
        q_segment_ids=segment_ids,
        kv_segment_ids=segment_ids,
    )
    raw, _ = model(tokens, positions, None, mask)
    raw = raw.astype(jnp.float32)
    if config.alignment == bd_config.SAME_POSITION:
      logits = raw
    else:
      index, found = predecessors(positions, segment_ids)
      logits = jnp.where(found[:, :, None], gather_rows(raw, index), 0.0)
    return exclude_mask_token(logits, config.mask_token_id)

  clean_tokens = masks.check_ids("clean_tokens", clean_tokens)
  clean_shape = clean_tokens.shape
  if clean_positions is None or clean_segment_ids is None:
    if clean_shape != tokens.shape:
      raise ValueError(
          f"clean_tokens {clean_shape} must have the canvas shape"
          f" {tokens.shape} unless clean_positions and clean_segment_ids are"
          " given."
      )
  clean_positions = masks.check_ids(
      "clean_positions",
      positions if clean_positions is None else clean_positions,
      clean_shape,
  )
  clean_segments = masks.check_ids(
      "clean_segment_ids",
      segment_ids if clean_segment_ids is None else clean_segment_ids,
      clean_shape,
  )
  if canvas_ids is None:
    canvas_ids = positions // config.block_size + 1
  canvas_ids = masks.check_ids("canvas_ids", canvas_ids, tokens.shape)
  both = lambda a, b: jnp.concatenate([a, b], axis=1)
  all_positions = both(positions, clean_positions)
  all_segments = both(segment_ids, clean_segments)
  all_canvases = both(canvas_ids, jnp.zeros_like(clean_positions))
  mask = masks.canvas_mask(
      all_positions,
      all_positions,
      config.block_size,
      q_canvas_ids=all_canvases,
      kv_canvas_ids=all_canvases,
      q_segment_ids=all_segments,
      kv_segment_ids=all_segments,
  )
  raw, _ = model(both(tokens, clean_tokens), all_positions, None, mask)
  raw = raw.astype(jnp.float32)
  if config.alignment == bd_config.SAME_POSITION:
    return exclude_mask_token(raw[:, :length], config.mask_token_id)
  # Inside a canvas the predecessor is in the canvas; a block's first token
  # is predicted from the end of the previous block, which is clean when
  # this block is denoised at inference.
  index, found = predecessors(positions, segment_ids, canvas_ids)
  clean_index, clean_found = locate(
      positions - 1, segment_ids, clean_positions, clean_segments
  )
  first_of_block = positions % config.block_size == 0
  index = jnp.where(first_of_block, clean_index + length, index)
  found = jnp.where(first_of_block, clean_found, found)
  logits = jnp.where(found[:, :, None], gather_rows(raw, index), 0.0)
  return exclude_mask_token(logits, config.mask_token_id)


def scale_logits(logits: jax.Array, temperature: Any) -> jax.Array:
  """float32 logits divided by the temperature, excluded entries kept.

  Entries at or below `MASKED_LOGIT` (the mask token) stay at
  `MASKED_LOGIT` at any temperature, so their probability is exactly 0 and
  no value or gradient overflows.

  Args:
    logits: `[..., vocab]` target-aligned logits.
    temperature: a finite number > 0, static (checked) or a traced scalar
      (the compiled denoising loop's; checked by its config).

  Raises:
    ValueError: for a static temperature that is not a finite number > 0.
  """
  if not isinstance(temperature, jax.Array):
    temperature = check_temperature(temperature)
  logits = logits.astype(jnp.float32)
  excluded = logits <= jnp.float32(MASKED_LOGIT)
  return jnp.where(excluded, jnp.float32(MASKED_LOGIT), logits / temperature)


def log_probs(logits: jax.Array, temperature: Any = 1.0) -> jax.Array:
  """The temperature-scaled log-softmax of every sampler and scorer.

  Rollout commits and recorded log-probs, replay and OPD all call this, so
  replay reproduces the rollout's log-probs by construction.

  Args:
    logits: `[..., vocab]` target-aligned logits.
    temperature: as for `scale_logits`.

  Returns:
    float32 `[..., vocab]` log-probabilities; the mask token's is
    `MASKED_LOGIT`-small (probability exactly 0).

  Raises:
    ValueError: for a static temperature that is not a finite number > 0.
  """
  return jax.nn.log_softmax(scale_logits(logits, temperature), axis=-1)


def token_log_probs(
    logits: jax.Array, targets: jax.Array, temperature: Any = 1.0
) -> jax.Array:
  """`log_probs(logits, temperature)` at `targets`, without `[..., vocab]` out.

  Args:
    logits: `[batch, length, vocab]` target-aligned logits.
    targets: int `[batch, length]` token ids.
    temperature: as for `scale_logits`.

  Returns:
    float32 `[batch, length]` log-probabilities of the targets.

  Raises:
    ValueError: for a bad temperature or targets of the wrong shape.
  """
  targets = masks.check_ids("targets", targets, logits.shape[:-1])
  scaled = scale_logits(logits, temperature)
  picked = jnp.take_along_axis(scaled, targets[..., None], axis=-1)[..., 0]
  return picked - jax.nn.logsumexp(scaled, axis=-1)
