# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.evaluation on a tiny Qwen3, against direct decoding."""

import dataclasses

from absl.testing import absltest
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.rl import evaluation
from tunix_bd.training import options
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_BD = bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3)
_NUM = 6
_DECODE = denoise.DenoiseConfig(
    max_new_tokens=8,
    max_prompt_length=32,
    stop_ids=(_TOKENIZER.eos_token_id,),
    pad_id=_TOKENIZER.pad_token_id,
)
_SETTINGS = options.HeldOutEval(
    num_prompts=_NUM,
    thresholds=(0.5, 0.9),
    sampled_samples=2,
    sampled_threshold=0.7,
    sampled_temperature=1.0,
    batch_size=4,  # 6 prompts: the second call wraps two rows.
    seed=5,
)


def _prompts(answers=None):
  conversations = dataset_lib.embedded_conversations(
      tasks_lib.TaskMix(max_len=3), "eval", _NUM
  )
  prompts = prompts_lib.encode_prompts(_TOKENIZER, conversations, 32)
  if answers is not None:
    prompts = dataclasses.replace(prompts, answers=tuple(answers))
  return prompts


def _direct(model, prompts, row, seed=None, **config):
  """Row `row` decoded alone: its text and tokens per forward."""
  out = denoise.Denoiser(
      model, bd=_BD, config=dataclasses.replace(_DECODE, **config)
  )(
      [prompts.tokens[row, : prompts.lengths[row]].tolist()],
      seeds=None if seed is None else [seed],
  )
  return _TOKENIZER.decode(out.completions[0].tolist()), float(
      out.tokens_per_forward[0]
  )


def _evaluate(model, prompts, settings=_SETTINGS):
  return evaluation.evaluate(
      model,
      prompts,
      bd=_BD,
      decode=_DECODE,
      settings=settings,
      tokenizer=_TOKENIZER,
  )


def _cluster_robust_se(before, after):
  """CR1 sandwich SE of the mean difference, clusters = prompts (by loops)."""
  diff = np.asarray(after, float) - np.asarray(before, float)
  diff = diff.reshape(diff.shape[0], -1)
  num, size = diff.shape
  mean = diff.mean()
  meat = sum((diff[i] - mean).sum() ** 2 for i in range(num))
  return np.sqrt(num / (num - 1) * meat) / (num * size)


class PairedDifferenceTest(absltest.TestCase):

  def test_matches_a_cluster_robust_reference(self):
    rng = np.random.default_rng(0)
    for shape in ((50,), (40, 4)):
      before = rng.random(shape) < 0.6
      after = rng.random(shape) < 0.7
      got = evaluation.paired_difference(before, after)
      self.assertAlmostEqual(got.delta, after.mean() - before.mean())
      self.assertAlmostEqual(
          (got.before, got.after), (before.mean(), after.mean())
      )
      self.assertAlmostEqual(got.se, _cluster_robust_se(before, after))

  def test_identical_results_have_zero_change_and_se(self):
    x = np.asarray([[1, 0], [0, 0], [1, 1]])
    got = evaluation.paired_difference(x, x)
    self.assertEqual((got.delta, got.se), (0.0, 0.0))

  def test_bad_shapes_fail(self):
    with self.assertRaisesRegex(ValueError, "one shape"):
      evaluation.paired_difference(np.zeros((3, 2)), np.zeros((3, 3)))
    with self.assertRaisesRegex(ValueError, ">= 2 prompts"):
      evaluation.paired_difference(np.zeros((1, 4)), np.zeros((1, 4)))

  def test_sample_seeds(self):
    seeds = evaluation.sample_seeds(3, 2, 10)
    np.testing.assert_array_equal(seeds, [[10, 11, 12], [13, 14, 15]])
    with self.assertRaisesRegex(ValueError, "eval.seed"):
      evaluation.sample_seeds(3, 2, 2**32 - 4)


class EvaluateTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = test_common.tiny_qwen3(256, seed=0, embed_dim=32)
    prompts = _prompts()
    # Half the answers are what the model decodes at threshold 0.9.
    texts = [
        _direct(cls.model, prompts, i, threshold=0.9)[0] for i in range(_NUM)
    ]
    cls.answers = [t if i % 2 == 0 else "x" + t for i, t in enumerate(texts)]
    cls.prompts = _prompts(cls.answers)
    cls.result = _evaluate(cls.model, cls.prompts)

  def test_greedy_is_each_prompt_decoded_alone(self):
    for label, decoded in self.result.greedy.items():
      for i in range(_NUM):
        text, tpf = _direct(self.model, self.prompts, i, threshold=float(label))
        self.assertEqual(decoded.texts[i], text)
        self.assertAlmostEqual(decoded.tokens_per_forward[i], tpf, places=5)
        self.assertEqual(decoded.correct[i], text == self.answers[i])
    np.testing.assert_array_equal(
        self.result.greedy["0.9"].correct, np.arange(_NUM) % 2 == 0
    )

  def test_sampled_rows_use_their_fixed_seeds(self):
    self.assertEqual(self.result.sampled_correct.shape, (_NUM, 2))
    for s in range(2):
      for i in (0, _NUM - 1):
        text, tpf = _direct(
            self.model,
            self.prompts,
            i,
            threshold=0.7,
            temperature=1.0,
            seed=5 + s * _NUM + i,
        )
        self.assertEqual(
            self.result.sampled_correct[i, s], text == self.answers[i]
        )
        self.assertAlmostEqual(
            self.result.sampled_tokens_per_forward[i, s], tpf, places=5
        )

  def test_another_rule_is_evaluated_and_labelled_at_its_own_parameter(self):
    decode = dataclasses.replace(_DECODE, rule="top_k", top_k=2)
    settings = dataclasses.replace(_SETTINGS, sampled_samples=1)
    result = evaluation.evaluate(
        self.model,
        self.prompts,
        bd=_BD,
        decode=decode,
        settings=settings,
        tokenizer=_TOKENIZER,
    )
    self.assertEqual(list(result.greedy), ["top_k=2"])
    self.assertEqual(
        result.greedy["top_k=2"].texts[0],
        _direct(self.model, self.prompts, 0, rule="top_k", top_k=2)[0],
    )
    self.assertIn("exact_match@top_k=2", result.to_json()["metrics"])
    self.assertEqual(result.sampled_setting, "T=1, top_k=2, 1 per prompt")

  def test_reevaluation_is_paired_exactly(self):
    again = _evaluate(self.model, self.prompts)
    changes = evaluation.compare(self.result, again)
    self.assertEqual(
        list(changes),
        [
            "exact_match@0.5",
            "tokens_per_forward@0.5",
            "exact_match@0.9",
            "tokens_per_forward@0.9",
            evaluation.SAMPLED,
        ],
    )
    for change in changes.values():
      self.assertEqual((change.delta, change.se), (0.0, 0.0))
    metrics = self.result.to_json()["metrics"]
    self.assertEqual(metrics["exact_match@0.9"], 0.5)
    self.assertEqual(
        metrics[evaluation.SAMPLED], self.result.sampled_correct.mean()
    )
    self.assertEqual(
        self.result.to_json()["greedy_correct"]["0.9"], [1, 0, 1, 0, 1, 0]
    )


if __name__ == "__main__":
  absltest.main()
