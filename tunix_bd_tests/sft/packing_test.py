# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.packing: first-fit rows and their assembly.

That a packed row's loss and gradients are its examples' alone is
sft/loss_test.py's `PackedRowTest`.
"""

from absl.testing import absltest
import numpy as np
from tunix_bd.sft import corruption
from tunix_bd.sft import packing
from tunix_bd_tests.sft import sft_test_common as common


def _first_fit_reference(ends, max_length, order):
  """First-fit as the textbook states it: the first open row with room."""
  rows, free = [], []
  for i in order:
    fits = [r for r in range(len(rows)) if free[r] >= ends[i]]
    if fits:
      rows[fits[0]].append(i)
      free[fits[0]] -= ends[i]
    else:
      rows.append([i])
      free.append(max_length - ends[i])
  return rows


class FirstFitTest(absltest.TestCase):

  def test_equals_a_brute_force_first_fit(self):
    rng = np.random.default_rng(0)
    for block_size, max_length in ((1, 7), (4, 48), (8, 60)):
      for _ in range(20):
        n = int(rng.integers(1, 40))
        ends = block_size * rng.integers(1, max_length // block_size + 1, n)
        order = rng.permutation(n)
        got = packing.first_fit(ends, max_length, block_size, order)
        want = _first_fit_reference(ends, max_length, order)
        want = sorted((sorted(r) for r in want), key=lambda r: r[0])
        self.assertEqual([r.tolist() for r in got], want)

  def test_examples_that_never_share_a_row_stay_in_order(self):
    rows = packing.first_fit(np.full(5, 32), 48, 8, np.array([3, 1, 4, 0, 2]))
    self.assertEqual([r.tolist() for r in rows], [[0], [1], [2], [3], [4]])


class JoinTest(absltest.TestCase):

  def test_lays_examples_side_by_side_in_their_own_segments(self):
    data = common.data(96)
    examples = [
        corruption.corrupt_example(
            data.row(i),
            example_id=i,
            epoch=0,
            corruption=corruption.SftCorruptionConfig(complementary=True),
            config=common.CONFIG,
            eos_id=common.EOS,
        )
        for i in range(2)
    ]
    alone = packing.join(examples[:1])
    for key in corruption.FIELDS:
      np.testing.assert_array_equal(alone[key], examples[0][key])
    row = packing.join(examples)
    ends = [int(e["segment_ids"][0].sum()) for e in examples]
    self.assertEqual([e % 8 for e in ends], [0, 0])
    np.testing.assert_array_equal(
        row["segment_ids"][0],
        np.repeat([1, 2, 0], [ends[0], ends[1], 96 - sum(ends)]),
    )
    second = slice(ends[0], sum(ends))
    for key in corruption.FIELDS:
      if key != "segment_ids":
        np.testing.assert_array_equal(
            row[key][:, second], examples[1][key][:, : ends[1]], err_msg=key
        )
    # The padding after them is the first example's: positions the index.
    np.testing.assert_array_equal(
        row["positions"][:, sum(ends) :],
        examples[0]["positions"][:, sum(ends) :],
    )


if __name__ == "__main__":
  absltest.main()
