# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Cached == cache-free and batch invariance: shifted, block size 4.

Block size 4 divides neither the prompt lengths (7, 2, 8) nor the 10 new
tokens; the rows' first blocks hold 3, 2 and 0 prompt tokens.
"""

from absl.testing import absltest
from tunix_bd.core import bd_config
from tunix_bd_tests.generate import denoise_test_common


class ShiftedExactnessTest(
    denoise_test_common.ExactnessTests, absltest.TestCase
):
  SETUP = dict(
      block_size=4,
      alignment=bd_config.SHIFTED,
      prompts=(
          [5, 17, 33, 8, 91, 40, 12],
          [64, 3],
          [22, 9, 71, 15, 101, 44, 6, 30],
      ),
      max_prompt_length=10,
      max_new_tokens=10,
  )
  SOLO_USE_CACHE = True


if __name__ == "__main__":
  absltest.main()
