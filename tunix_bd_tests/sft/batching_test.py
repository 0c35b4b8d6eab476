# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.batching: global and micro-batches, order, resume."""

import pickle
import re

from absl.testing import absltest
from absl.testing import parameterized
import grain
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_EOS = _TOKENIZER.eos_token_id
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_CONFIG = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)
_NUM_EXAMPLES = 18  # Not a multiple of the batch size: epochs drop examples.


def _data(max_length=48):
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=5
  )
  conversations = dataset_lib.embedded_conversations(
      mix, "train", _NUM_EXAMPLES
  )
  return dataset_lib.tokenize(_TOKENIZER, conversations, max_length)


def _batches(data=None, k=1, complementary=False, seed=0, **kwargs):
  return batching.sft_batches(
      data or _data(),
      batch_size=4,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.2, max_noise=0.9, complementary=complementary, seed=1
      ),
      config=_CONFIG,
      eos_id=_EOS,
      seed=seed,
      gradient_accumulation_steps=k,
      **kwargs,
  )


def _assert_equal(a, b):
  for key in batching.BATCH_FIELDS:
    np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


class SftBatchesTest(parameterized.TestCase):

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
    data = _data()
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

  def test_resume_sees_the_same_canvases(self):
    # PeftTrainer resumes by skipping `iter_steps` items of a new iterator.
    k, skipped = 2, 5
    uninterrupted = [b for _, b in zip(range(12), iter(_batches(k=k)))]
    resumed_iterator = iter(_batches(k=k))
    for _ in range(skipped):
      next(resumed_iterator)
    for i in range(skipped, 12):
      _assert_equal(next(resumed_iterator), uninterrupted[i])
    # Random access agrees too, and epochs go on forever by default.
    fresh = _batches(k=k)
    _assert_equal(fresh[7], uninterrupted[7])
    self.assertGreater(len(fresh), 10**9)
    # So do a pickled copy (grain worker processes) and a threaded reader.
    _assert_equal(pickle.loads(pickle.dumps(fresh))[9], uninterrupted[9])
    threaded = fresh.to_iter_dataset(
        grain.ReadOptions(num_threads=8, prefetch_buffer_size=16)
    )
    for want, got in zip(uninterrupted, threaded):
      _assert_equal(got, want)

  def test_eval_batches_are_their_own_global_batch(self):
    ds = batching.eval_batches(
        _data(),
        batch_size=4,
        corruption=corruption.SftCorruptionConfig(complementary=True),
        config=_CONFIG,
        eos_id=_EOS,
    )
    self.assertLen(ds, 4)
    for batch in ds:
      np.testing.assert_array_equal(batch.accumulation_steps, 1)
      np.testing.assert_allclose(
          batch.global_weight, batch.loss_weights.sum(), rtol=1e-6
      )
    _assert_equal(ds[2], ds[2])

  def test_rejects_bad_settings(self):
    with self.assertRaisesRegex(
        ValueError, "gradient_accumulation_steps=3 must divide batch_size=4"
    ):
      _batches(k=3)
    with self.assertRaisesRegex(ValueError, "gradient_accumulation_steps"):
      _batches(k=0)
    with self.assertRaisesRegex(ValueError, "num_epochs"):
      _batches(num_epochs=0)
    with self.assertRaisesRegex(ValueError, "batch_size=20 exceeds the"):
      batching.sft_batches(
          _data(),
          batch_size=20,
          corruption=corruption.SftCorruptionConfig(),
          config=_CONFIG,
          eos_id=_EOS,
          seed=0,
      )

  def test_errors_name_the_config_key(self):
    # sft.py's held-out batches: the key is eval.batch_size, not batch_size.
    with self.assertRaisesRegex(
        ValueError, r"^eval\.batch_size=20 exceeds the \d+ examples"
    ):
      batching.eval_batches(
          _data(),
          batch_size=20,
          corruption=corruption.SftCorruptionConfig(),
          config=_CONFIG,
          eos_id=_EOS,
          section="eval",
      )
    with self.assertRaisesRegex(
        ValueError,
        r"^train\.gradient_accumulation_steps=3 must divide"
        r" train\.batch_size=4",
    ):
      _batches(k=3, section="train")

  def test_row_too_long_after_eos_fill_fails_before_any_batch(self):
    data = _data()
    # Rows that fit 36 columns unfilled; some need 40 after the EOS fill.
    keep = [c for c, n in zip(data.conversations, data.lengths) if n <= 36]
    short = dataset_lib.tokenize(_TOKENIZER, keep, 36)
    filled = -(-short.lengths // 8) * 8
    self.assertTrue((filled <= 36).any() and (filled > 36).any())
    where = keep[int(np.flatnonzero(filled > 36)[0])].where
    with self.assertRaisesRegex(
        ValueError, rf"^{re.escape(where)}: .* need 40 positions"
    ):
      _batches(short)


if __name__ == "__main__":
  absltest.main()
