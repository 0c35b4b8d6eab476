# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.block_cache on a tiny real Tunix Qwen3."""

import inspect

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import cached_logits
from tunix_bd.core import diffusion_lm
from tunix_bd_tests import test_common

_VOCAB = 96
_MASK = 7
_ALIGNMENTS = (bd_config.SAME_POSITION, bd_config.SHIFTED)
# One canvas length for every test: each shape compiles the model once.
_LENGTH = 12
_MODEL = test_common.JittedModel(test_common.tiny_qwen3(vocab_size=_VOCAB))


def _logits(model, tokens, positions, segments, config):
  return diffusion_lm.diffusion_logits_fn(
      model, tokens, positions, segments, config=config
  )


def _block(model, tokens, positions, segments, cache, config):
  return cached_logits.block_logits_with_cache(
      model, tokens, positions, segments, cache, config=config
  )


def _config(block_size, alignment):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size,
      mask_token_id=_MASK,
      alignment=alignment,
      layout=bd_config.SINGLE_CANVAS,
  )


def _random_tokens(rng, shape):
  tokens = rng.integers(0, _VOCAB - 1, shape)
  return np.where(tokens >= _MASK, tokens + 1, tokens)  # Never the mask id.


def _aligned_batch(prompt_lengths, block_size, gen_blocks, trims, seed):
  """Rows left-padded by whole blocks so that their blocks line up.

  Row r's first block to denoise is `prompt_r // block_size` (it may start
  mid-prompt); the rows are padded so that it sits at the same physical block
  `first` in every row, then `gen_blocks` blocks follow, the last one trimmed
  by `trims[r]` right pads (a partial final block).

  Returns:
    `(first, pos, seg, clean, noisy)`: the first denoising physical block and
    `[batch, (first + gen_blocks) * block_size]` arrays; only completion
    tokens are masked in `noisy`.
  """
  rng = np.random.default_rng(seed)
  firsts = [p // block_size for p in prompt_lengths]
  first = max(firsts)
  length = (first + gen_blocks) * block_size
  batch = len(prompt_lengths)
  pos = np.zeros((batch, length), np.int32)
  seg = np.zeros((batch, length), np.int32)
  for r, (f, trim) in enumerate(zip(firsts, trims)):
    start = (first - f) * block_size
    n = length - start - trim
    pos[r, start : start + n] = np.arange(n)
    seg[r, start : start + n] = 1
  clean = _random_tokens(rng, (batch, length))
  completion = (pos >= np.asarray(prompt_lengths)[:, None]) & (seg > 0)
  noisy = np.where(completion & (rng.random(pos.shape) < 0.6), _MASK, clean)
  return first, pos, seg, clean, noisy


class BlockCacheTest(parameterized.TestCase):

  @parameterized.product(
      alignment=_ALIGNMENTS,
      setup=(
          # (prompt lengths, block size, trims of the final block)
          ((5, 1, 6), 4, (0, 2, 3)),
          ((4, 2, 5), 3, (1, 0, 2)),
      ),
  )
  def test_cached_equals_cache_free(self, alignment, setup):
    prompt_lengths, block_size, trims = setup
    gen_blocks = _LENGTH // block_size - max(prompt_lengths) // block_size
    first, pos, seg, clean, noisy = _aligned_batch(
        prompt_lengths, block_size, gen_blocks, trims, seed=block_size
    )
    config = _config(block_size, alignment)
    batch, length = pos.shape
    cache = block_cache.init_block_cache(_MODEL, batch, length)
    if first:
      width = first * block_size
      # The prompt's complete blocks, committed in one forward.
      _, cache = cached_logits.block_logits_with_cache(
          _MODEL,
          clean[:, :width],
          pos[:, :width],
          seg[:, :width],
          cache,
          config=config,
      )
    for k in range(first, first + gen_blocks):
      here = slice(k * block_size, (k + 1) * block_size)
      canvas = np.where(np.arange(length) < here.start, clean, noisy)
      want = np.asarray(_logits(_MODEL, canvas, pos, seg, config))[:, here]
      got, _ = _block(
          _MODEL, noisy[:, here], pos[:, here], seg[:, here], cache, config
      )
      real = seg[:, here] > 0
      np.testing.assert_allclose(
          np.asarray(got)[real], want[real], atol=1e-5, rtol=1e-5
      )
      _, cache = _block(
          _MODEL, clean[:, here], pos[:, here], seg[:, here], cache, config
      )
    self.assertEqual(int(cache.end_index), length)

  @parameterized.product(
      alignment=_ALIGNMENTS,
      setup=(((5, 1, 6), 4, (0, 2, 3)), ((4, 2, 5), 3, (1, 0, 2))),
  )
  def test_fused_write_equals_separate_write(self, alignment, setup):
    # Each block's first step runs over [earlier clean blocks; its canvas],
    # committing only the clean part: its logits, and every later step's,
    # are those of the cache-free canvas, and the kept cache is the one a
    # separate clean write gives.
    prompt_lengths, block_size, trims = setup
    gen_blocks = _LENGTH // block_size - max(prompt_lengths) // block_size
    first, pos, seg, clean, noisy = _aligned_batch(
        prompt_lengths, block_size, gen_blocks, trims, seed=block_size
    )
    self.assertGreater(first, 0)
    config = _config(block_size, alignment)
    batch, length = pos.shape
    empty = block_cache.init_block_cache(_MODEL, batch, length)
    fused, separate = empty, empty
    rng = np.random.default_rng(0)
    for k in range(first, first + gen_blocks):
      here = slice(k * block_size, (k + 1) * block_size)
      real = seg[:, here] > 0
      # The prompt prefill rides on the first block's first step.
      start = 0 if k == first else (k - 1) * block_size
      chunk = slice(start, here.stop)
      canvas = np.where(np.arange(length) < here.start, clean, noisy)
      want = np.asarray(_logits(_MODEL, canvas, pos, seg, config))[:, here]
      got, fused = cached_logits.block_logits_with_cache(
          _MODEL,
          canvas[:, chunk],
          pos[:, chunk],
          seg[:, chunk],
          fused,
          config=config,
          commit_length=here.start - start,
      )
      np.testing.assert_allclose(
          np.asarray(got)[:, -block_size:][real],
          want[real],
          atol=1e-5,
          rtol=1e-5,
      )
      committed = slice(start, here.start)
      _, separate = _block(
          _MODEL,
          clean[:, committed],
          pos[:, committed],
          seg[:, committed],
          separate,
          config,
      )
      end = here.start
      self.assertEqual(int(fused.end_index), end)
      for name in ("positions", "segment_ids", "boundary_positions"):
        np.testing.assert_array_equal(
            getattr(fused, name), getattr(separate, name), err_msg=name
        )
      np.testing.assert_array_equal(fused.segment_ids[:, end:], 0)
      np.testing.assert_allclose(
          fused.boundary_rows, separate.boundary_rows, atol=1e-5
      )
      for layer, kv in fused.kv.items():
        np.testing.assert_array_equal(
            kv["end_index"], separate.kv[layer]["end_index"]
        )
        # Pad slots are never read (segment 0), so only real slots count.
        written = separate.segment_ids > 0
        for part in ("k", "v"):
          np.testing.assert_allclose(
              kv[part][written],
              separate.kv[layer][part][written],
              atol=1e-5,
              rtol=1e-5,
          )
      # A later step of block k against the kept cache: the fused pass's
      # uncommitted slots of block k are overwritten, never read.
      later = np.where(
          real & (rng.random(real.shape) < 0.5), _MASK, clean[:, here]
      )
      canvas = np.where(np.arange(length) < here.start, clean, noisy)
      canvas[:, here] = later
      want = np.asarray(_logits(_MODEL, canvas, pos, seg, config))[:, here]
      got, _ = _block(_MODEL, later, pos[:, here], seg[:, here], fused, config)
      np.testing.assert_allclose(
          np.asarray(got)[real], want[real], atol=1e-5, rtol=1e-5
      )

  def test_the_logits_call_takes_the_rows_call_s_arguments(self):
    signature = lambda fn: inspect.signature(fn).parameters
    self.assertEqual(
        signature(cached_logits.block_logits_with_cache),
        signature(cached_logits.block_rows_with_cache),
    )

  def test_cache_fails_closed(self):
    config = _config(4, bd_config.SHIFTED)
    tokens = np.full((3, 6), 9)
    pos = np.arange(6)[None].repeat(3, 0)
    cache = block_cache.init_block_cache(_MODEL, 3, _LENGTH)
    _, cache = cached_logits.block_logits_with_cache(
        _MODEL, tokens[:, :4], pos[:, :4], None, cache, config=config
    )
    self.assertEqual(int(cache.end_index), 4)
    np.testing.assert_array_equal(cache.boundary_positions, [3, 3, 3])
    with self.assertRaisesRegex(ValueError, "8 free slots"):
      cached_logits.block_logits_with_cache(
          _MODEL,
          np.full((3, 10), 9),
          np.arange(4, 14)[None].repeat(3, 0),
          None,
          cache,
          config=config,
      )
    with self.assertRaisesRegex(ValueError, "batch size"):
      cached_logits.block_logits_with_cache(
          _MODEL, tokens[:2, :4], pos[:2, :4] + 4, None, cache, config=config
      )
    with self.assertRaisesRegex(ValueError, "block_positions must have shape"):
      cached_logits.block_logits_with_cache(
          _MODEL, tokens[:, :4], pos[:, :3] + 4, None, cache, config=config
      )
    with self.assertRaisesRegex(ValueError, "block_end_rows_of=block_size"):
      cached_logits.block_logits_with_cache(
          _MODEL,
          tokens[:, :4],
          pos[:, :4] + 4,
          None,
          cache,
          config=config,
          canvas_ids=np.ones((3, 4), np.int32),
      )
    for bad in (0, 5, 2.0, True):
      with self.assertRaisesRegex(ValueError, "commit_length must be"):
        cached_logits.block_logits_with_cache(
            _MODEL,
            tokens[:, :4],
            pos[:, :4] + 4,
            None,
            cache,
            config=config,
            commit_length=bad,
        )
    with self.assertRaisesRegex(ValueError, "cache_size"):
      block_cache.init_block_cache(_MODEL, 1, 0)


if __name__ == "__main__":
  absltest.main()
