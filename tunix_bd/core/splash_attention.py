# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Block-diffusion attention through the Pallas Splash kernel: linear memory.

`attention="splash"` (`model.attention` of SFT) runs a Qwen3 forward of its
own over Tunix's modules, the block-diffusion mask computed inside the
kernel tile by tile (`BlockDiffusionSplashMask`). The contract (positions
are the physical index up to a block-aligned shift per document, padding
to tiles, what is refused) is docs/design.md "Splash attention".
"""

from __future__ import annotations

import functools
import math

from flax import nnx
import jax
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask
import jax.numpy as jnp
from tunix.models.qwen3 import model as qwen3_model
from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd.core import families
from tunix_bd.core import layer_scan

DENSE = "dense"
SPLASH = "splash"
ATTENTIONS = (DENSE, SPLASH)
# Splash's lane width: sequence tiles are multiples of it.
_TILE = 128


def check_attention(attention, key: str = "model.attention") -> str:
  """`attention` if it is one of `ATTENTIONS`; a ValueError naming `key`."""
  return config_utils.check_choice(key, attention, ATTENTIONS)


def check_model(model, key: str = "model.attention") -> None:
  """Fails closed on a model other than a Tunix Qwen3, or a qwix-wrapped one."""
  config = getattr(model, "config", None)
  if config is None or families.family(config) != "qwen3":
    raise ValueError(
        f"{key}={SPLASH!r} supports Tunix Qwen3 models only, got"
        f" {type(model).__name__}; use {key}={DENSE!r}."
    )
  if hasattr(type(model), "_unquantized_type") or compat.is_lora_enabled(model):
    raise ValueError(
        f"{key}={SPLASH!r} calls the model's modules itself, outside qwix's"
        f" LoRA or quantization interception; use {key}={DENSE!r} or full"
        " fine-tuning."
    )


class BlockDiffusionSplashMask(splash_mask._ComputableMask):  # pylint: disable=protected-access
  """The block-diffusion mask of physical indices, for the Splash kernel.

  Single canvas (`copy_length=None`): query i attends key j iff `j //
  block_size <= i // block_size` (`masks.block_causal_mask` at positions
  = indices). `[noisy ; clean]` (`copy_length=L`, `L % block_size == 0`):
  with blocks `Q = i // block_size`, `K = j // block_size` and `n = L //
  block_size` blocks a copy, a noisy query (`Q < n`) attends its own block
  (`K == Q`) and the earlier clean blocks (`n <= K < Q + n`); a clean query
  the clean blocks up to its own (`n <= K <= Q`)
  (`masks.clean_context_mask`). For shape (4, 4) and block size 2:

      single canvas     [noisy ; clean], L = 2 (n0 n1 c0 c1)
      1 1 0 0           1 1 0 0
      1 1 0 0           1 1 0 0
      1 1 1 1           0 0 1 1
      1 1 1 1           0 0 1 1

  Segments go to the kernel apart, as `SegmentIds`.
  """

  def __init__(
      self, length: int, block_size: int, copy_length: int | None = None
  ):
    self.block_size = config_utils.check_int("block_size", block_size, 1)
    self.copy_length = copy_length
    if copy_length is not None and (
        copy_length % block_size or 2 * copy_length != length
    ):
      raise ValueError(
          f"copy_length={copy_length} must be half of length={length} and"
          f" a multiple of block_size={block_size}."
      )

    # Runs on NumPy slices when Splash builds its block map, and on int32
    # iotas inside the kernel: comparisons and integer arithmetic only.
    def mask_function(q_ids, kv_ids):
      q, k = q_ids // block_size, kv_ids // block_size
      if copy_length is None:
        return k <= q
      n = copy_length // block_size
      noisy = (q < n) & ((k == q) | ((k >= n) & (k < q + n)))
      return noisy | ((q >= n) & (k >= n) & (k <= q))

    super().__init__((length, length), mask_function)

  def _key(self):
    return (type(self), self.shape, self.block_size, self.copy_length)

  def __eq__(self, other: object):
    if not isinstance(other, BlockDiffusionSplashMask):
      return NotImplemented
    return self._key() == other._key()

  def __hash__(self):
    # Splash caches processed masks by hash.
    return hash(self._key())


@functools.lru_cache(maxsize=16)
def _kernel(num_heads, length, block_size, copy_length, interpret):
  """The Splash kernel of one mask, built once: its block map is NumPy work.

  Built with concrete arrays even when first asked for under a trace, so
  the cached kernel holds no tracer.
  """
  mask = BlockDiffusionSplashMask(length, block_size, copy_length)
  tile = max(t for t in (512, 256, 128) if length % t == 0)
  with jax.ensure_compile_time_eval():
    return splash.make_splash_mha(
        splash_mask.MultiHeadMask([mask] * num_heads),
        block_sizes=splash.BlockSizes(
            block_q=tile,
            block_kv=tile,
            block_q_dkv=tile,
            block_kv_dkv=tile,
            block_q_dq=tile,
            block_kv_dq=tile,
        ),
        head_shards=1,
        q_seq_shards=1,
        interpret=interpret,
    )


def _layer(layer, x, positions, segment_ids, kernel):
  """Tunix's Qwen3 `DecoderLayer.block`, attention through `kernel`."""
  attn = layer.attn
  h = layer.input_layernorm(x)
  q = attn.q_norm(attn.q_proj(h))
  k = attn.k_norm(attn.k_proj(h))
  v = attn.v_proj(h)
  # Tunix Qwen3's RoPE as its `Attention.block` calls it (default theta,
  # `compat.ROPE_THETA_APPLIED`); the tests hold this equal to `model(...)`.
  q = qwen3_model.apply_rope(q, positions, head_dim=attn.head_dim)
  k = qwen3_model.apply_rope(k, positions, head_dim=attn.head_dim)
  # [batch, time, heads, head_dim] <-> [batch, heads, time, head_dim].
  heads_first = lambda a: a.transpose(0, 2, 1, 3)
  ids = splash.SegmentIds(q=segment_ids, kv=segment_ids)
  out = jax.vmap(lambda q, k, v, ids: kernel(q, k, v, segment_ids=ids))(
      heads_first(q * attn.scale), heads_first(k), heads_first(v), ids
  )
  x = x + attn.o_proj(heads_first(out))
  return x + layer.mlp(layer.post_attention_layernorm(x))


def _pad_copies(array, copies: int, padded: int):
  """`[batch, copies * length]` -> each copy padded to `padded` with 0 (pads:
  segment 0)."""
  parts = jnp.split(array, copies, axis=1)
  width = padded - parts[0].shape[1]
  return jnp.concatenate([jnp.pad(p, ((0, 0), (0, width))) for p in parts], 1)


def _fits_the_kernel(positions, segment_ids, length, block_size) -> jax.Array:
  """Whether the kernel's mask of indices is the mask of these positions:
  each document's positions are its indices less one multiple of
  `block_size` (docs/design.md "Splash attention"); pads do not matter."""
  index = jnp.tile(
      jnp.arange(length, dtype=jnp.int32), positions.shape[1] // length
  )
  shift = index[None, :] - positions
  real = segment_ids != 0
  aligned = jnp.all((shift % block_size == 0) | ~real)
  # One shift per document: equal neighbours once sorted by segment.
  order = jnp.argsort(segment_ids, axis=1)
  segments = jnp.take_along_axis(segment_ids, order, axis=1)
  shifts = jnp.take_along_axis(shift, order, axis=1)
  same = (segments[:, 1:] == segments[:, :-1]) & (segments[:, 1:] != 0)
  return aligned & jnp.all(~same | (shifts[:, 1:] == shifts[:, :-1]))


def hidden_states(
    model,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    *,
    block_size: int,
    clean_context: bool,
    scan_layers: bool = False,
) -> jax.Array:
  """The final-norm hidden states of the model's row, Splash attention.

  The row is int `[batch, n]`: one canvas, or `[noisy ; clean]` (`n = 2 L`)
  when `clean_context`; each document's positions are its indices in its
  copy less one multiple of `block_size` (`_fits_the_kernel`). Returns
  `[batch, n, embed]` in the model's compute dtype, equal to the dense
  forward's at every non-pad token; NaN everywhere when traced positions
  break the contract. `scan_layers`: the layers in one scan (`layer_scan`),
  else a Python loop.
  """
  check_model(model)
  copies = 2 if clean_context else 1
  n = tokens.shape[1]
  if n % copies:
    raise ValueError(f"a [noisy ; clean] row has an even length, got {n}.")
  length = n // copies
  fits = _fits_the_kernel(positions, segment_ids, length, block_size)
  if not isinstance(fits, jax.core.Tracer) and not fits:
    raise ValueError(
        f"attention={SPLASH!r} needs every document's positions to be its"
        " index in its copy less a multiple of block_size, the same for the"
        " whole document (right padding, or packed documents that each"
        " start at a block boundary; no other left padding or shuffles);"
        f" use attention={DENSE!r} for such rows."
    )
  unit = math.lcm(_TILE, block_size)
  padded = -(-length // unit) * unit
  tokens, segment_ids, positions = (
      _pad_copies(x, copies, padded) for x in (tokens, segment_ids, positions)
  )
  config = model.config
  kernel = _kernel(
      config.num_heads,
      copies * padded,
      block_size,
      padded if clean_context else None,
      jax.default_backend() != "tpu",
  )
  # A closure, not a partial: `nnx.remat` binds arguments by position.
  layer_fn = lambda layer, x, pos, ids: _layer(layer, x, pos, ids, kernel)
  no_remat = families.remat_config(config, "none")
  if config.remat_config not in (no_remat, no_remat.value):
    layer_fn = nnx.remat(layer_fn)
  x = model.embedder.encode(tokens)
  if scan_layers and layer_scan.same_structure(model.layers):
    step = lambda layer, x, _: (
        layer_fn(layer, x, positions, segment_ids),
        None,
    )
    stacked = layer_scan.stack_states(model.layers)
    x = layer_scan.scan_stacked(*stacked, step, x)[0]
  else:
    for layer in model.layers:
      x = layer_fn(layer, x, positions, segment_ids)
  x = model.final_norm(x)
  x = jnp.concatenate([c[:, :length] for c in jnp.split(x, copies, 1)], 1)
  return jnp.where(fits, x, jnp.nan)
