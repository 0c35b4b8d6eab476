# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.evaluation.held_out (decoding: rl_evaluation_test)."""

import dataclasses

from absl.testing import absltest
import numpy as np
from tunix_bd.evaluation import held_out
from tunix_bd_tests import test_common

_TOKENIZER, _BD, _CONFIG, _PROMPTS = test_common.char_task_decoding(
    max_new_tokens=4
)


class HeldOutTest(absltest.TestCase):

  def _decode(self, prompts=_PROMPTS, **kwargs):
    return held_out.decode_prompts(
        test_common.tiny_qwen3(256, embed_dim=32),
        prompts,
        bd=_BD,
        config=_CONFIG,
        tokenizer=_TOKENIZER,
        batch_size=2,
        **kwargs,
    )

  def test_calls_are_one_size_and_filler_rows_are_dropped(self):
    sizes = []
    decoded = self._decode(
        on_batch=lambda out: sizes.append(len(out.completions))
    )
    self.assertEqual(sizes, [2, 2, 2])  # 5 prompts: one wrapped filler row.
    self.assertLen(decoded.texts, 5)
    self.assertEqual(decoded.correct.shape, (5,))
    self.assertEqual(decoded.tokens_per_forward.shape, (5,))
    self.assertEqual(decoded.exact_match, float(np.mean(decoded.correct)))

  def test_missing_answers_and_bad_seeds_fail(self):
    with self.assertRaisesRegex(ValueError, "reference answers"):
      self._decode(dataclasses.replace(_PROMPTS, answers=None))
    with self.assertRaisesRegex(ValueError, r"seeds must have shape \(5,\)"):
      self._decode(seeds=np.arange(4))

  def test_greedy_metrics_names(self):
    decoded = held_out.Decoded(
        texts=["a", "b"],
        correct=np.asarray([True, False]),
        tokens_per_forward=np.asarray([1.0, 2.0]),
    )
    self.assertEqual(
        held_out.greedy_metrics({0.5: decoded}),
        {"exact_match@0.5": 0.5, "tokens_per_forward@0.5": 1.5},
    )


if __name__ == "__main__":
  absltest.main()
