# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.batching: checked streams, resume, row checks."""

import dataclasses
import pickle
import re

from absl.testing import absltest
from absl.testing import parameterized
import grain
import numpy as np
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption
from tunix_bd.sft import micro_batches
from tunix_bd.training import options
from tunix_bd_tests.sft import sft_test_common as common


def _batches(data=None, k=1, complementary=False, seed=0, **kwargs):
  return batching.sft_batches(
      data or common.data(),
      batch_size=4,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.2, max_noise=0.9, complementary=complementary, seed=1
      ),
      config=common.CONFIG,
      eos_id=common.EOS,
      seed=seed,
      gradient_accumulation_steps=k,
      **kwargs,
  )


def _assert_equal(a, b):
  for field in dataclasses.fields(micro_batches.SftBatch):
    key = field.name
    np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


def _one_row(prompt_length=3, length=10, width=16, last=common.EOS, mask_at=0):
  """A one-row dataset with no conversation (errors name `example 0`)."""
  tokens = np.full((1, width), common.TOKENIZER.pad_token_id, np.int32)
  tokens[0, :length] = 20
  tokens[0, length - 1] = last
  if mask_at:
    tokens[0, mask_at] = common.MASK
  lengths = np.array([prompt_length, length], np.int32)
  return dataset_lib.TokenizedDataset(tokens, lengths[:1], lengths[1:], ())


class SftBatchesTest(parameterized.TestCase):

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
    ds = batching.sft_batches(
        common.data(),
        **batching.ONE_PASS,
        batch_size=4,
        corruption=corruption.SftCorruptionConfig(complementary=True),
        config=common.CONFIG,
        eos_id=common.EOS,
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
          common.data(),
          batch_size=20,
          corruption=corruption.SftCorruptionConfig(),
          config=common.CONFIG,
          eos_id=common.EOS,
          seed=0,
      )

  def test_errors_name_the_config_key(self):
    # sft.py's held-out batches: the key is eval.batch_size, not batch_size.
    with self.assertRaisesRegex(
        ValueError, r"^eval\.batch_size=20 exceeds the \d+ examples"
    ):
      batching.sft_batches(
          common.data(),
          **batching.ONE_PASS,
          batch_size=20,
          corruption=corruption.SftCorruptionConfig(),
          config=common.CONFIG,
          eos_id=common.EOS,
          section="eval",
      )
    with self.assertRaisesRegex(
        ValueError,
        r"^train\.gradient_accumulation_steps=3 must divide"
        r" train\.batch_size=4",
    ):
      _batches(k=3, section="train")
    # Packed, the batch counts rows: 18 examples fill fewer than 18.
    with self.assertRaisesRegex(
        ValueError,
        r"^train\.batch_size=16 exceeds the \d+ rows that the 18 examples of"
        r" its dataset pack into \(data\.packing=True\)",
    ):
      batching.sft_batches(
          common.data(96),
          batch_size=16,
          corruption=corruption.SftCorruptionConfig(),
          config=common.CONFIG,
          eos_id=common.EOS,
          seed=0,
          section="train",
          packing=True,
      )

  def test_row_too_long_after_eos_fill_fails_before_any_batch(self):
    data = common.data()
    # Rows that fit 36 columns unfilled; some need 40 after the EOS fill.
    keep = [c for c, n in zip(data.conversations, data.lengths) if n <= 36]
    short = dataset_lib.tokenize(common.TOKENIZER, keep, 36)
    filled = -(-short.lengths // 8) * 8
    self.assertTrue((filled <= 36).any() and (filled > 36).any())
    where = keep[int(np.flatnonzero(filled > 36)[0])].where
    with self.assertRaisesRegex(
        ValueError, rf"^{re.escape(where)}: .* need 40 positions"
    ):
      _batches(short)

  @parameterized.named_parameters(
      ("no_completion", dict(prompt_length=10), "has no completion"),
      ("no_eos", dict(last=50), "does not end with EOS"),
      ("mask_token", dict(mask_at=1), "a real token equals mask_token_id"),
      ("empty_prompt", dict(prompt_length=0), "position 0 to be prompt"),
      ("eos_fill", dict(length=13, width=14), "13 tokens.*need 16 positions"),
  )
  def test_bad_rows_fail_naming_the_example(self, row, message):
    batching.validate_dataset(_one_row(), common.CONFIG, common.EOS)
    with self.assertRaisesRegex(ValueError, f"^example 0: .*{message}"):
      batching.validate_dataset(_one_row(**row), common.CONFIG, common.EOS)


class TrainAndEvalBatchesTest(absltest.TestCase):

  def _streams(self, train_data, eval_data, eval_batch_size=4):
    return batching.train_and_eval_batches(
        train_data,
        eval_data,
        train=options.Train(batch_size=4, gradient_accumulation_steps=2),
        eval_batch_size=eval_batch_size,
        corruption=corruption.SftCorruptionConfig(
            min_noise=0.2, max_noise=0.9, seed=1
        ),
        config=common.CONFIG,
        eos_id=common.EOS,
        seed=3,
    )

  def test_the_train_and_eval_streams_of_the_sections(self):
    data = common.data()
    train, held_out = self._streams(data, data)
    for i in range(6):
      _assert_equal(train[i], _batches(data, k=2, seed=3)[i])
    want = batching.sft_batches(
        data,
        **batching.ONE_PASS,
        batch_size=4,
        corruption=corruption.SftCorruptionConfig(
            min_noise=0.2, max_noise=0.9, seed=1
        ),
        config=common.CONFIG,
        eos_id=common.EOS,
    )
    self.assertLen(held_out, len(want))
    for got, expected in zip(held_out, want):
      _assert_equal(got, expected)

  def test_errors_name_the_section_keys(self):
    data = common.data()
    with self.assertRaisesRegex(
        ValueError, r"^eval\.batch_size=20 exceeds the \d+ examples"
    ):
      self._streams(data, data, eval_batch_size=20)
    # A held-out row is checked as well as a training row.
    keep = [c for c, n in zip(data.conversations, data.lengths) if n <= 36]
    short = dataset_lib.tokenize(common.TOKENIZER, keep, 36)
    with self.assertRaisesRegex(ValueError, r"need 40 positions"):
      self._streams(data, short)


if __name__ == "__main__":
  absltest.main()
