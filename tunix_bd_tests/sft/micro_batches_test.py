# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.micro_batches: global and micro-batches, order."""

import pickle

from absl.testing import absltest
from absl.testing import parameterized
import grain
import numpy as np
from tunix_bd.sft import corruption
from tunix_bd.sft import micro_batches
from tunix_bd.sft import packing
from tunix_bd_tests.sft import sft_test_common as common


def _source(
    data=None,
    k=1,
    complementary=False,
    seed=0,
    num_epochs=None,
    shuffle=True,
    packing=False,
):
  return micro_batches.MicroBatches(
      data or common.data(),
      batch_size=4,
      accumulation_steps=k,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.2, max_noise=0.9, complementary=complementary, seed=1
      ),
      config=common.CONFIG,
      eos_id=common.EOS,
      seed=seed,
      num_epochs=num_epochs,
      shuffle=shuffle,
      packing=packing,
  )


def _batches(*args, **kwargs):
  return grain.MapDataset.source(_source(*args, **kwargs))


class MicroBatchesTest(parameterized.TestCase):

  @parameterized.product(k=(2, 4), complementary=(False, True))
  def test_micro_batches_split_the_global_batch(self, k, complementary):
    whole = _batches(k=1, complementary=complementary, num_epochs=2)
    micro = _batches(k=k, complementary=complementary, num_epochs=2)
    self.assertLen(whole, 8)  # 2 epochs of 18 // 4 = 4 batches.
    self.assertLen(micro, 8 * k)
    rows = 4 * (1 + complementary)
    for g in range(len(whole)):
      parts = [micro[g * k + i] for i in range(k)]
      for part in parts:
        self.assertEqual(part.tokens.shape, (rows // k, 48))
        np.testing.assert_array_equal(part.accumulation_steps, k)
        # The denominator is the total weight of the whole global batch.
        np.testing.assert_array_equal(
            part.global_weight, whole[g].loss_weights.sum()
        )
      for key in corruption.FIELDS:
        np.testing.assert_array_equal(
            np.concatenate([getattr(p, key) for p in parts]),
            getattr(whole[g], key),
        )
      np.testing.assert_array_equal(whole[g].accumulation_steps, 1)
      if complementary:
        # Each example's two rows are adjacent: exact complements.
        c = whole[g].corruption_mask
        np.testing.assert_array_equal(
            c[1::2], whole[g].completion_mask[0::2] & ~c[0::2]
        )

  def test_order_is_a_permutation_per_epoch(self):
    data = common.data()
    ds = _batches(data, num_epochs=3)
    seen = []
    for epoch in range(3):
      clean = np.concatenate([ds[epoch * 4 + b].tokens for b in range(4)])
      ids = [
          int(np.flatnonzero((data.tokens[:, :20] == r[:20]).all(1))[0])
          for r in clean
      ]
      self.assertLen(set(ids), 16)  # 16 distinct examples, 2 dropped.
      seen.append(ids)
    self.assertNotEqual(seen[0], seen[1])
    other_seed = _batches(data, seed=1, num_epochs=1)
    self.assertFalse(np.array_equal(other_seed[0].tokens, ds[0].tokens))
    unshuffled = _batches(data, num_epochs=1, shuffle=False)
    np.testing.assert_array_equal(
        unshuffled[1].tokens[:, :20], data.tokens[4:8, :20]
    )

  def test_packed_rows_are_fixed_first_fit_rows_of_a_seeded_order(self):
    data = common.data(96)
    ends = -(-data.lengths // 8) * 8
    source = _source(data, num_epochs=2, packing=True)
    rows = source.rows
    # Every example once, fewer rows than examples, none over 96 tokens.
    np.testing.assert_array_equal(
        np.sort(np.concatenate(rows)), np.arange(len(data))
    )
    self.assertLess(len(rows), len(data) * 2 // 3)
    self.assertLessEqual(max(ends[r].sum() for r in rows), 96)
    self.assertLen(source, len(rows) // 4 * 2)
    # Each epoch serves the rows in its own order: a row's segments are its
    # examples, each from position 0.
    sizes = sorted(len(r) for r in rows)
    for epoch in range(2):
      got = []
      for b in range(len(rows) // 4):
        batch = source[epoch * (len(rows) // 4) + b]
        for seg, pos in zip(batch.segment_ids, batch.positions):
          got.append(int(np.sum((pos == 0) & (seg > 0))))
          self.assertEqual(seg.max(), got[-1])
      self.assertContainsSubset(got, sizes)
      self.assertGreater(max(got), 1)
    # A pickled copy (grain's worker processes) serves the same batches.
    copy = pickle.loads(pickle.dumps(source))
    for key in corruption.FIELDS:
      np.testing.assert_array_equal(
          getattr(copy[3], key), getattr(source[3], key)
      )
    # The packing order is seeded; unshuffled, it is the dataset's.
    other = _source(data, seed=1, packing=True).rows
    self.assertNotEqual([r.tolist() for r in other], [r.tolist() for r in rows])
    unshuffled = _source(data, shuffle=False, packing=True).rows
    self.assertEqual(
        [r.tolist() for r in unshuffled],
        [r.tolist() for r in packing.first_fit(ends, 96, 8, np.arange(18))],
    )

  def test_packing_what_never_shares_a_row_is_the_unpacked_stream(self):
    # 48-token rows hold one of these examples (32 to 40 tokens) each.
    packed, unpacked = (
        _source(complementary=True, num_epochs=2, packing=p) for p in (1, 0)
    )
    self.assertLen(packed, len(unpacked))
    for i in (0, 5):
      for key in corruption.FIELDS:
        np.testing.assert_array_equal(
            getattr(packed[i], key), getattr(unpacked[i], key)
        )

  def test_index_out_of_range(self):
    ds = _source(num_epochs=1)
    self.assertLen(ds, 4)
    with self.assertRaisesRegex(IndexError, "micro-batch 4 is out of range"):
      ds[4]


if __name__ == "__main__":
  absltest.main()
