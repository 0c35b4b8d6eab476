# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.eos, the one EOS and padding rule."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.core import eos


class FillTest(parameterized.TestCase):

  @parameterized.parameters(1, 2, 4, 5)
  def test_fill_mask_is_the_rest_of_the_stop_block(self, block_size):
    positions = np.arange(23)
    for stop in range(23):
      got = eos.fill_mask(stop, positions, block_size)
      block = stop // block_size
      want = [p > stop and p // block_size == block for p in positions]
      np.testing.assert_array_equal(got, want)
      # The filled completion ends where fill_length says.
      end = eos.fill_length(stop + 1, block_size)
      self.assertEqual(stop + 1 + got.sum(), min(end, len(positions)))

  def test_fill_mask_per_row_on_shuffled_positions(self):
    positions = np.asarray([[5, 2, 3, 4, 6, 7], [0, 1, 2, 3, 4, 5]])
    stops = np.asarray([[4], [np.iinfo(np.int32).max - 4]])
    got = eos.fill_mask(stops, positions, 4)
    np.testing.assert_array_equal(
        got, [[True, False, False, False, True, True], [False] * 6]
    )


class StopTest(absltest.TestCase):

  def test_first_stop_and_truncation(self):
    tokens = np.asarray([[4, 1, 7, 1], [4, 4, 4, 4], [9, 4, 4, 4]])
    np.testing.assert_array_equal(
        eos.first_stop_index(tokens, (1, 9)), [1, 4, 0]
    )
    self.assertEqual(
        [r.tolist() for r in eos.truncate_at_stop(tokens, (1, 9))],
        [[4], [4, 4, 4, 4], []],
    )


if __name__ == "__main__":
  absltest.main()
