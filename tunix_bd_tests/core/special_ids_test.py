# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.special_ids, the one special-id validator."""

import itertools
import types

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd.core import special_ids
from tunix_bd.data import tokenizer as tokenizer_lib

_MASK, _PAD, _EOS = 9, 0, 2


def _distinguishable(mask, pad, stops, eos, vocab):
  """Brute force: every role's ids apart, all inside the vocabulary."""
  if len(set(stops)) != len(stops) or pad in stops:
    return False
  if mask in {pad, eos, *stops}:
    return False
  return all(0 <= i < vocab for i in (mask, pad, eos, *stops))


def _stop_ids(eos, extra=()):
  tokenizer = types.SimpleNamespace(eos_token_id=eos)
  return special_ids.tokenizer_stop_ids(tokenizer, extra)


class StopIdsTest(parameterized.TestCase):

  def test_eos_first_then_the_extra_ids(self):
    self.assertEqual(_stop_ids(_EOS, (5, 3)), (_EOS, 5, 3))
    self.assertEqual(_stop_ids(_EOS), (_EOS,))

  def test_without_eos_the_extra_ids_stop_alone(self):
    self.assertEqual(_stop_ids(None, (5,)), (5,))
    with self.assertRaisesRegex(ValueError, "no EOS token and"):
      _stop_ids(None, ())

  @parameterized.named_parameters(
      ("duplicate", (5, 5), r"^rollout\.extra_stop_ids has duplicates"),
      ("eos_repeated", (_EOS,), "repeats the tokenizer's EOS id 2"),
      ("negative", (-1,), r"^rollout\.extra_stop_ids must be token ids"),
      ("bool", (True,), "must be token ids"),
      ("float", (1.5,), "must be token ids"),
      ("string", "12", "must be token ids"),
  )
  def test_bad_extra_ids_name_the_key(self, extra, message):
    with self.assertRaisesRegex(ValueError, message):
      _stop_ids(_EOS, extra)


class TokenizerStopIdsTest(absltest.TestCase):

  def test_the_checkpoints_stop_ids_follow_the_eos(self):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    eos = tokenizer.eos_token_id
    self.assertEqual(special_ids.checkpoint_stop_ids(tokenizer), ())
    self.assertEqual(special_ids.tokenizer_stop_ids(tokenizer, (7,)), (eos, 7))
    # As an SDAR import sets them (`bd_formats.adapt_tokenizer`).
    setattr(tokenizer, special_ids.CHECKPOINT_STOP_IDS_ATTR, (5, 3))
    self.assertEqual(special_ids.checkpoint_stop_ids(tokenizer), (5, 3))
    self.assertEqual(
        special_ids.tokenizer_stop_ids(tokenizer, (7, 3)), (eos, 5, 3, 7)
    )
    with self.assertRaisesRegex(ValueError, "repeats the tokenizer's EOS"):
      special_ids.tokenizer_stop_ids(tokenizer, (eos,))


class CheckTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("stop_repeated", dict(stop_ids=(2, 2)), "stop_ids has duplicates"),
      ("stop_is_pad", dict(stop_ids=(2, _PAD)), "the pad id 0 cannot be"),
      ("mask_is_pad", dict(pad_id=_MASK), "equals pad_id"),
      ("mask_is_eos", dict(eos_id=_MASK), "equals eos_id"),
      ("mask_is_stop", dict(stop_ids=(2, _MASK)), r"equals stop_ids\[1\]"),
      ("mask_outside", dict(mask_token_id=16), r"vocabulary \[0, 16\)"),
      ("stop_outside", dict(stop_ids=(2, 20)), r"\[20\] are outside"),
      ("pad_outside", dict(pad_id=16), r"\[16\] are outside"),
  )
  def test_each_rule_fails_closed(self, change, message):
    kwargs = dict(
        mask_token_id=_MASK, pad_id=_PAD, stop_ids=(_EOS,), vocab_size=16
    )
    kwargs.update(change)
    with self.assertRaisesRegex(ValueError, message):
      special_ids.check(**kwargs)

  def test_agrees_with_a_brute_force_rule_over_small_id_sets(self):
    vocab = 5
    for mask, pad, eos in itertools.product(range(6), repeat=3):
      for stops in ((), (eos,), (eos, 1), (eos, eos), (3, 4, 5)):
        expected = _distinguishable(mask, pad, stops or (eos,), eos, vocab)
        kwargs = dict(mask_token_id=mask, pad_id=pad, vocab_size=vocab)
        try:
          special_ids.check(stop_ids=stops or (eos,), eos_id=eos, **kwargs)
          accepted = True
        except ValueError:
          accepted = False
        self.assertEqual(accepted, expected, (mask, pad, eos, stops))

  def test_without_a_pad_or_vocabulary_only_the_ids_themselves_are_checked(
      self,
  ):
    special_ids.check(mask_token_id=1000, pad_id=None, stop_ids=(3,))
    with self.assertRaisesRegex(ValueError, "equals stop_ids"):
      special_ids.check(mask_token_id=3, pad_id=None, stop_ids=(3,))


if __name__ == "__main__":
  absltest.main()
