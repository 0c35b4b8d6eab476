# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for the block-diffusion attention masks in `tunix_bd.core.masks`."""

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.generate import utils as generate_utils
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd.core import masks
from tunix_bd_tests import test_common

_LAYOUTS = ("canonical", "shuffled", "left_padded", "packed", "packed_shuffled")
_BLOCK_SIZES = (1, 2, 3, 5, 8, 16)
# Prime, so no block size above 1 divides it: the final block is partial.
_LENGTH = 17


def _random_row(
    rng: np.random.Generator, length: int, layout: str
) -> tuple[np.ndarray, np.ndarray]:
  """One row of (positions, segment ids) in the given physical layout."""
  if layout == "canonical":
    return np.arange(length), np.ones(length, np.int32)
  if layout == "shuffled":
    return rng.permutation(length), np.ones(length, np.int32)
  num_real = int(rng.integers(1, length + 1))
  num_pad = length - num_real
  # Pads get arbitrary positions: the masks must ignore them.
  pad_positions = rng.integers(-3, 2 * length, num_pad)
  if layout == "left_padded":
    positions = np.concatenate([pad_positions, np.arange(num_real)])
    segments = np.concatenate([np.zeros(num_pad), np.ones(num_real)])
    return positions, segments.astype(np.int32)
  # Packing: documents with positions restarting at 0, then pads.
  num_cuts = int(rng.integers(0, min(3, num_real - 1) + 1))
  cuts = np.sort(rng.choice(np.arange(1, num_real), num_cuts, replace=False))
  doc_lengths = np.diff(np.concatenate([[0], cuts, [num_real]]))
  positions = np.concatenate(
      [np.arange(n) for n in doc_lengths] + [pad_positions]
  )
  segments = np.concatenate(
      [np.full(n, d + 1) for d, n in enumerate(doc_lengths)]
      + [np.zeros(num_pad)]
  ).astype(np.int32)
  if layout == "packed_shuffled":
    order = rng.permutation(length)
    positions, segments = positions[order], segments[order]
  return positions, segments


def _random_batch(seed: int, batch: int, length: int, layout: str):
  rng = np.random.default_rng(seed)
  rows = [_random_row(rng, length, layout) for _ in range(batch)]
  positions = np.stack([r[0] for r in rows]).astype(np.int32)
  segments = np.stack([r[1] for r in rows]).astype(np.int32)
  return positions, segments


def _reference_block_causal(q_pos, kv_pos, block_size, q_seg, kv_seg):
  """Brute force, one (query, key) pair at a time."""
  batch, q_len = q_pos.shape
  kv_len = kv_pos.shape[1]
  out = np.zeros((batch, q_len, kv_len), bool)
  for b in range(batch):
    for i in range(q_len):
      for j in range(kv_len):
        same_segment = q_seg[b, i] == kv_seg[b, j] and kv_seg[b, j] != 0
        causal = kv_pos[b, j] // block_size <= q_pos[b, i] // block_size
        out[b, i, j] = same_segment and causal
  return out


def _reference_clean_context(pos, block_size, seg):
  """Brute force over the `[noisy ; clean]` sequence of length 2L."""
  batch, length = pos.shape
  out = np.zeros((batch, 2 * length, 2 * length), bool)
  for b in range(batch):
    for i in range(2 * length):
      for j in range(2 * length):
        qi, kj = i % length, j % length
        q_clean, k_clean = i >= length, j >= length
        q_block = pos[b, qi] // block_size
        k_block = pos[b, kj] // block_size
        if not q_clean and not k_clean:
          allowed = k_block == q_block
        elif not q_clean and k_clean:
          allowed = k_block < q_block
        elif q_clean and k_clean:
          allowed = k_block <= q_block
        else:
          allowed = False
        same_segment = seg[b, qi] == seg[b, kj] and seg[b, kj] != 0
        out[b, i, j] = allowed and same_segment
  return out


@nnx.jit
def _forward(model, tokens, positions, cache, mask):
  # One compiled program per shape: fast, and two calls that differ only in
  # the mask run the same program.
  return model(tokens, positions, cache, mask)


def _tiny_qwen3() -> qwen3_lib.Qwen3:
  return test_common.tiny_qwen3(vocab_size=64)


class BlockCausalMaskTest(parameterized.TestCase):

  @parameterized.product(layout=_LAYOUTS, block_size=_BLOCK_SIZES)
  def test_matches_brute_force(self, layout, block_size):
    pos, seg = _random_batch(block_size, 3, _LENGTH, layout)
    got = masks.block_causal_mask(
        pos, pos, block_size, q_segment_ids=seg, kv_segment_ids=seg
    )
    np.testing.assert_array_equal(
        got, _reference_block_causal(pos, pos, block_size, seg, seg)
    )

  @parameterized.product(layout=_LAYOUTS, block_size=(1, 4, 7))
  def test_matches_brute_force_with_other_keys(self, layout, block_size):
    q_pos, q_seg = _random_batch(1, 2, 5, layout)
    kv_pos, kv_seg = _random_batch(2, 2, 23, layout)
    got = masks.block_causal_mask(
        q_pos, kv_pos, block_size, q_segment_ids=q_seg, kv_segment_ids=kv_seg
    )
    self.assertEqual(got.shape, (2, 5, 23))
    np.testing.assert_array_equal(
        got, _reference_block_causal(q_pos, kv_pos, block_size, q_seg, kv_seg)
    )

  def test_no_segment_ids_is_one_segment(self):
    pos, _ = _random_batch(0, 2, _LENGTH, "shuffled")
    ones = np.ones_like(pos)
    np.testing.assert_array_equal(
        masks.block_causal_mask(pos, pos, 4),
        _reference_block_causal(pos, pos, 4, ones, ones),
    )

  def test_pad_queries_and_keys_are_masked(self):
    pos = np.array([[5, 0, 1, 2]])
    seg = np.array([[0, 1, 1, 1]])
    got = np.asarray(
        masks.block_causal_mask(
            pos, pos, 2, q_segment_ids=seg, kv_segment_ids=seg
        )
    )
    self.assertFalse(got[0, 0].any())
    self.assertFalse(got[0, :, 0].any())
    np.testing.assert_array_equal(
        got[0, 1:, 1:], [[1, 1, 0], [1, 1, 0], [1, 1, 1]]
    )

  @parameterized.parameters("canonical", "shuffled")
  def test_block_size_one_is_causal(self, layout):
    pos, _ = _random_batch(3, 2, _LENGTH, layout)
    got = masks.block_causal_mask(pos, pos, 1)
    causal = pos[:, None, :] <= pos[:, :, None]
    np.testing.assert_array_equal(got, causal)
    if layout == "canonical":
      tril = np.tril(np.ones((_LENGTH, _LENGTH), bool))
      np.testing.assert_array_equal(got, np.broadcast_to(tril, got.shape))

  def test_block_size_one_matches_tunix_causal_mask_with_left_padding(self):
    pos, seg = _random_batch(4, 3, _LENGTH, "left_padded")
    got = masks.block_causal_mask(
        pos, pos, 1, q_segment_ids=seg, kv_segment_ids=seg
    )
    want = generate_utils.make_causal_attn_mask(jnp.asarray(seg > 0), _LENGTH)
    np.testing.assert_array_equal(got, want)

  def test_jit_matches_eager(self):
    pos, seg = _random_batch(5, 2, _LENGTH, "packed_shuffled")
    fn = jax.jit(masks.block_causal_mask, static_argnums=2)
    np.testing.assert_array_equal(
        fn(pos, pos, 3, q_segment_ids=seg, kv_segment_ids=seg),
        masks.block_causal_mask(
            pos, pos, 3, q_segment_ids=seg, kv_segment_ids=seg
        ),
    )


class CleanContextMaskTest(parameterized.TestCase):

  @parameterized.product(layout=_LAYOUTS, block_size=_BLOCK_SIZES)
  def test_matches_brute_force(self, layout, block_size):
    pos, seg = _random_batch(10 + block_size, 2, _LENGTH, layout)
    got = masks.clean_context_mask(pos, block_size, segment_ids=seg)
    self.assertEqual(got.shape, (2, 2 * _LENGTH, 2 * _LENGTH))
    np.testing.assert_array_equal(
        got, _reference_clean_context(pos, block_size, seg)
    )

  def test_docstring_example(self):
    got = masks.clean_context_mask(np.arange(3)[None], 2)
    np.testing.assert_array_equal(
        got[0].astype(int),
        [
            [1, 1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1, 1],
        ],
    )

  def test_clean_copy_is_the_single_canvas_mask(self):
    pos, seg = _random_batch(7, 2, _LENGTH, "packed_shuffled")
    got = masks.clean_context_mask(pos, 4, segment_ids=seg)
    np.testing.assert_array_equal(
        got[:, _LENGTH:, _LENGTH:],
        masks.block_causal_mask(
            pos, pos, 4, q_segment_ids=seg, kv_segment_ids=seg
        ),
    )


class Qwen3AttentionTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = _tiny_qwen3()

  def test_block_size_one_reproduces_causal_logits_bit_for_bit(self):
    length = 12
    tokens = jax.random.randint(jax.random.key(1), (2, length), 1, 64)
    # Row 1 is left-padded by 5.
    input_mask = np.ones((2, length), bool)
    input_mask[1, :5] = False
    segments = input_mask.astype(np.int32)
    positions = np.maximum(np.cumsum(input_mask, axis=1) - 1, 0).astype(
        np.int32
    )

    causal = generate_utils.make_causal_attn_mask(
        jnp.asarray(input_mask), length
    )
    want, _ = _forward(self.model, tokens, positions, None, causal)
    block_mask = masks.block_causal_mask(
        positions,
        positions,
        1,
        q_segment_ids=segments,
        kv_segment_ids=segments,
    )
    got, _ = _forward(self.model, tokens, positions, None, block_mask)
    np.testing.assert_array_equal(got, want)
    # Pad query rows attend nothing, yet K_MASK keeps their logits finite.
    self.assertTrue(np.isfinite(np.asarray(got)).all())
    # The mask is honored: larger blocks change the logits.
    wider, _ = _forward(
        self.model,
        tokens,
        positions,
        None,
        masks.block_causal_mask(
            positions,
            positions,
            4,
            q_segment_ids=segments,
            kv_segment_ids=segments,
        ),
    )
    self.assertGreater(np.abs(np.asarray(wider - want)).max(), 1e-4)

  def test_cached_block_matches_full_forward(self):
    # Cache slot i holds position i; slots not yet written are pad keys.
    # Batch 2 and length 12 reuse the compiled full forward of the test above.
    batch, length, block_size, cache_size = 2, 12, 4, 16
    tokens = jax.random.randint(jax.random.key(2), (batch, length), 1, 64)
    positions = np.tile(np.arange(length, dtype=np.int32), (batch, 1))
    full, _ = _forward(
        self.model,
        tokens,
        positions,
        None,
        masks.block_causal_mask(positions, positions, block_size),
    )

    slots = np.tile(np.arange(cache_size, dtype=np.int32), (batch, 1))
    cache = self.model.init_cache(batch, cache_size, jnp.float32)
    got = []
    for start in range(0, length, block_size):
      stop = start + block_size
      q_positions = positions[:, start:stop]
      mask = masks.block_causal_mask(
          q_positions,
          slots,
          block_size,
          q_segment_ids=np.ones_like(q_positions),
          kv_segment_ids=(slots < stop).astype(np.int32),
      )
      logits, cache = _forward(
          self.model, tokens[:, start:stop], q_positions, cache, mask
      )
      got.append(logits)
    np.testing.assert_allclose(
        np.concatenate(got, axis=1), full, atol=1e-5, rtol=1e-5
    )


class ValidationTest(parameterized.TestCase):

  _POS = np.arange(6, dtype=np.int32)[None]

  @parameterized.parameters(0, -2, 2.0, True, "4", None)
  def test_bad_block_size(self, block_size):
    with self.assertRaisesRegex(ValueError, "block_size"):
      masks.block_causal_mask(self._POS, self._POS, block_size)
    with self.assertRaisesRegex(ValueError, "block_size"):
      masks.clean_context_mask(self._POS, block_size)

  @parameterized.named_parameters(
      dict(
          testcase_name="q_rank",
          kwargs=dict(q_positions=np.arange(6)),
          name="q_positions",
      ),
      dict(
          testcase_name="kv_rank",
          kwargs=dict(kv_positions=np.zeros((1, 6, 1), np.int32)),
          name="kv_positions",
      ),
      dict(
          testcase_name="float_positions",
          kwargs=dict(q_positions=np.zeros((1, 6), np.float32)),
          name="q_positions",
      ),
      dict(
          testcase_name="batch",
          kwargs=dict(kv_positions=np.zeros((2, 6), np.int32)),
          name="q_positions batch size 1 differs from kv_positions",
      ),
      dict(
          testcase_name="q_segment_shape",
          kwargs=dict(
              q_segment_ids=np.ones((1, 5), np.int32),
              kv_segment_ids=np.ones((1, 6), np.int32),
          ),
          name="q_segment_ids",
      ),
      dict(
          testcase_name="kv_segment_shape",
          kwargs=dict(
              q_segment_ids=np.ones((1, 6), np.int32),
              kv_segment_ids=np.ones((2, 6), np.int32),
          ),
          name="kv_segment_ids",
      ),
      dict(
          testcase_name="only_q_segments",
          kwargs=dict(q_segment_ids=np.ones((1, 6), np.int32)),
          name="kv_segment_ids",
      ),
      dict(
          testcase_name="only_kv_segments",
          kwargs=dict(kv_segment_ids=np.ones((1, 6), np.int32)),
          name="q_segment_ids",
      ),
  )
  def test_bad_block_causal_inputs(self, kwargs, name):
    args = dict(q_positions=self._POS, kv_positions=self._POS, block_size=2)
    args.update(kwargs)
    with self.assertRaisesRegex(ValueError, name):
      masks.block_causal_mask(**args)

  def test_bad_clean_context_inputs(self):
    with self.assertRaisesRegex(ValueError, "positions"):
      masks.clean_context_mask(np.arange(6), 2)
    with self.assertRaisesRegex(ValueError, "segment_ids"):
      masks.clean_context_mask(
          self._POS, 2, segment_ids=np.ones((1, 5), np.int32)
      )


if __name__ == "__main__":
  absltest.main()
