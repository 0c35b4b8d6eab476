# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Cached == cache-free and batch invariance: same-position, block size 3.

Block size 3 divides neither the prompt lengths (4, 1, 5) nor the 7 new
tokens; batch invariance runs on the cache-free path here.
"""

from absl.testing import absltest
from tunix_bd.core import bd_config
from tunix_bd_tests.generate import denoise_test_common


class SamePositionExactnessTest(
    denoise_test_common.ExactnessTests, absltest.TestCase
):
  SETUP = dict(
      block_size=3,
      alignment=bd_config.SAME_POSITION,
      prompts=([40, 2, 77, 19], [8], [90, 14, 61, 25, 33]),
      max_prompt_length=7,
      max_new_tokens=7,
  )
  SOLO_USE_CACHE = False


if __name__ == "__main__":
  absltest.main()
