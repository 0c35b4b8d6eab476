# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.generate.prompt_batches: decoding and scoring prompt sets.

Sampled held-out decoding itself: rl/evaluation_test.
"""

import dataclasses
import itertools

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.data import scoring
from tunix_bd.generate import prompt_batches
from tunix_bd_tests import test_common

_TOKENIZER, _BD, _CONFIG, _PROMPTS = test_common.char_task_decoding(
    max_new_tokens=8, temperature=1.0
)
_GREEDY = dataclasses.replace(_CONFIG, max_new_tokens=4, temperature=0.0)


class CallRowsTest(parameterized.TestCase):

  def test_every_prompt_once_in_order_then_wrapped_filler(self):
    for num, size in itertools.product(range(1, 9), range(1, 6)):
      calls = prompt_batches.call_rows(num, size)
      self.assertTrue(all(len(c) == size for c in calls), (num, size))
      flat = np.concatenate(calls)
      np.testing.assert_array_equal(flat[:num], np.arange(num))
      np.testing.assert_array_equal(
          flat[num:], np.arange(len(flat) - num) % num
      )
      self.assertLess(len(flat) - num, size)

  @parameterized.parameters((0, 2), (3, 0))
  def test_refuses_empty_sets_and_batches(self, num, size):
    with self.assertRaisesRegex(ValueError, "need num_prompts >= 1"):
      prompt_batches.call_rows(num, size)


class DecodePromptsTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = test_common.tiny_qwen3(256, embed_dim=32)

  def _decode(self, prompts=_PROMPTS, **kwargs):
    kwargs.setdefault("batch_size", 2)
    return prompt_batches.decode_prompts(
        self.model, _TOKENIZER, prompts, bd=_BD, config=_CONFIG, **kwargs
    )

  def test_a_prompt_decodes_alike_in_any_call_size_and_input_form(self):
    seeds = np.asarray([11, 3, 7, 5, 2])
    by_two = self._decode(seeds=seeds)
    alone = self._decode(seeds=seeds, batch_size=1)
    ragged = [list(t[:n]) for t, n in zip(_PROMPTS.tokens, _PROMPTS.lengths)]
    as_lists = self._decode(ragged, seeds=seeds)
    for other in (alone, as_lists):
      self.assertEqual(by_two.texts, other.texts)
      np.testing.assert_array_equal(by_two.num_forwards, other.num_forwards)
    np.testing.assert_allclose(
        by_two.tokens_per_forward,
        by_two.num_tokens / np.maximum(by_two.num_forwards, 1),
    )

  def test_an_int_seed_is_the_base_of_per_row_seeds(self):
    self.assertEqual(
        self._decode(seeds=4).texts,
        self._decode(seeds=4 + np.arange(5)).texts,
    )

  def test_sampling_needs_seeds_and_seeds_must_fit(self):
    with self.assertRaisesRegex(ValueError, "pass one seed per row"):
      self._decode()
    with self.assertRaisesRegex(ValueError, r"seeds must have shape \(5,\)"):
      self._decode(seeds=np.arange(4))
    with self.assertRaisesRegex(ValueError, "no prompts to decode"):
      self._decode([])


class HeldOutTest(absltest.TestCase):

  def test_prompts_with_answers_are_scored_and_filler_rows_dropped(self):
    model = test_common.tiny_qwen3(256, embed_dim=32)
    sizes = []
    results = prompt_batches.greedy(
        model,
        _PROMPTS,
        bd=_BD,
        decode=_GREEDY,
        thresholds=(0.5,),
        tokenizer=_TOKENIZER,
        batch_size=2,
        on_first_batch=lambda out: sizes.append(len(out.completions)),
    )
    self.assertEqual(sizes, [2, 2, 2])  # 5 prompts: one wrapped filler row.
    decoded = results["0.5"]
    self.assertLen(decoded.texts, 5)
    want = [
        scoring.exact_match(t, a)
        for t, a in zip(decoded.texts, _PROMPTS.answers)
    ]
    np.testing.assert_array_equal(decoded.correct, want)
    self.assertEqual(decoded.tokens_per_forward.shape, (5,))
    ragged = [list(t[:n]) for t, n in zip(_PROMPTS.tokens, _PROMPTS.lengths)]
    unscored = prompt_batches.decode_prompts(
        model, _TOKENIZER, ragged, bd=_BD, config=_GREEDY, batch_size=2
    )
    self.assertIsNone(unscored.correct)
    with self.assertRaisesRegex(ValueError, "reference answers"):
      prompt_batches.greedy(
          model,
          dataclasses.replace(_PROMPTS, answers=None),
          bd=_BD,
          decode=_GREEDY,
          thresholds=(0.5,),
          tokenizer=_TOKENIZER,
          batch_size=2,
      )

  def test_answers_that_state_results_are_also_scored_on_them(self):
    model = test_common.tiny_qwen3(256, embed_dim=32)
    decode = lambda prompts: prompt_batches.greedy(
        model,
        prompts,
        bd=_BD,
        decode=_GREEDY,
        thresholds=(0.5,),
        tokenizer=_TOKENIZER,
        batch_size=2,
    )["0.5"]
    plain = decode(_PROMPTS)
    self.assertIsNone(plain.final_correct)  # No answer states a result.
    # Worked answers: the even rows state the result each completion ends
    # with, so they score on it though none matches whole.
    answers = tuple(
        f"work\n#### {scoring.final_answer(t) if i % 2 == 0 else 'x'}"
        for i, t in enumerate(plain.texts)
    )
    worked = decode(dataclasses.replace(_PROMPTS, answers=answers))
    self.assertEqual(worked.texts, plain.texts)
    np.testing.assert_array_equal(worked.final_correct, [1, 0, 1, 0, 1])
    np.testing.assert_array_equal(worked.correct, [0, 0, 0, 0, 0])
    self.assertEqual(
        prompt_batches.greedy_metrics({"0.5": worked})["final_answer@0.5"],
        0.6,
    )

  def test_thresholds_are_swept_only_under_the_threshold_rule(self):
    model = test_common.tiny_qwen3(256, embed_dim=32)
    for decode, labels in (
        (_GREEDY, ["0.5", "0.9"]),
        (dataclasses.replace(_GREEDY, rule="top_k", top_k=2), ["top_k=2"]),
        (dataclasses.replace(_GREEDY, rule="factor"), ["factor=1.0"]),
    ):
      results = prompt_batches.greedy(
          model,
          _PROMPTS,
          bd=_BD,
          decode=decode,
          thresholds=(0.5, 0.9),
          tokenizer=_TOKENIZER,
          batch_size=5,
      )
      self.assertEqual(list(results), labels)
      # Each label is what decoded: the last setting, decoded directly.
      direct = prompt_batches.decode_prompts(
          model,
          _TOKENIZER,
          _PROMPTS,
          bd=_BD,
          config=decode.sweep((0.9,))[-1],
          batch_size=5,
      )
      self.assertEqual(results[labels[-1]].texts, direct.texts)

  def test_greedy_metrics_names(self):
    decoded = prompt_batches.DecodeResult(
        texts=["a", "b"],
        num_tokens=np.asarray([1, 2]),
        num_forwards=np.asarray([1, 1]),
        tokens_per_forward=np.asarray([1.0, 2.0]),
        seconds=0.0,
        max_replay_error=None,
        correct=np.asarray([True, False]),
    )
    self.assertEqual(
        prompt_batches.greedy_metrics({"0.5": decoded}),
        {"exact_match@0.5": 0.5, "tokens_per_forward@0.5": 1.5},
    )


if __name__ == "__main__":
  absltest.main()
