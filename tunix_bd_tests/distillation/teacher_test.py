# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The OPD teacher: exact causal alignment, vocabulary alignment, refusals."""

import os

from absl.testing import absltest
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import scoring
from tunix_bd.core import special_ids
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.models import bd_formats
from tunix_bd_tests import test_common

_VOCAB = 64


def _raw_causal(model, tokens):
  """The model's own causal logits, `[batch, length, vocab]`."""
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
  length = tokens.shape[1]
  mask = jnp.tril(jnp.ones((length, length), bool))
  batch_mask = jnp.broadcast_to(mask, (tokens.shape[0], length, length))
  raw, _ = model(tokens, positions, None, batch_mask)
  return np.asarray(raw, np.float32)


class TeacherAlignmentTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.model = test_common.tiny_qwen3(_VOCAB, seed=3)
    rng = np.random.default_rng(0)
    self.tokens = jnp.asarray(rng.integers(5, _VOCAB, (2, 9)), jnp.int32)
    self.positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
    self.segments = jnp.ones((2, 9), jnp.int32)

  def _aligned(self, vocab_size, mask_id):
    """`teacher_lib.aligned_logits` of the test's rows, `[2, 9, vocab_size]`."""
    return teacher_lib.aligned_logits(
        self.model,
        self.tokens,
        self.positions,
        self.segments,
        vocab_size=vocab_size,
        mask_token_id=mask_id,
    )

  def test_aligned_logits_are_the_raw_causal_logits_shifted_by_one(self):
    mask_id = 4
    aligned = np.asarray(self._aligned(_VOCAB, mask_id))
    raw = _raw_causal(self.model, self.tokens)
    expected = raw[:, :-1].copy()
    expected[..., mask_id] = diffusion_lm.MASKED_LOGIT
    np.testing.assert_allclose(aligned[:, 1:], expected, atol=2e-5, rtol=1e-5)
    # Slot 0 has no predecessor: no teacher opinion (weight 0 downstream).
    np.testing.assert_array_equal(np.delete(aligned[:, 0], mask_id, -1), 0.0)

  def test_student_with_an_added_mask_row_gets_zero_teacher_mass_there(self):
    mask_id = _VOCAB  # The row SFT added: outside the teacher's vocabulary.
    logp = np.asarray(
        scoring.log_probs(self._aligned(_VOCAB + 1, mask_id)[:, 3:], 1.0)
    )
    self.assertEqual(logp.shape, (2, 6, _VOCAB + 1))
    self.assertTrue((np.exp(logp[..., mask_id]) == 0).all())
    # The teacher's own distribution, untouched, on its own ids.
    raw = _raw_causal(self.model, self.tokens)[:, 2:-1]
    expected = raw - np.log(np.exp(raw).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp[..., :_VOCAB], expected, atol=2e-5)

  def test_a_reserved_mask_id_is_excluded_and_renormalized(self):
    logp = np.asarray(scoring.log_probs(self._aligned(_VOCAB, 7)[:, 3:], 2.0))
    self.assertTrue((np.exp(logp[..., 7]) == 0).all())
    np.testing.assert_allclose(np.exp(logp).sum(-1), 1.0, atol=1e-5)

  def test_larger_teacher_vocabulary_fails(self):
    with self.assertRaisesRegex(ValueError, "larger than the student"):
      teacher_lib.check_teacher_model(self.model.config, _VOCAB - 1)
    teacher_lib.check_teacher_model(self.model.config, _VOCAB + 1)


class TeacherCompatibilityTest(absltest.TestCase):

  def test_same_tokenizer_and_one_added_mask_token_pass(self):
    teacher_tok = tokenizer_lib.build_char_tokenizer()
    student_tok = tokenizer_lib.build_char_tokenizer()
    student_tok.add_special_tokens(
        {"additional_special_tokens": ["<|new_mask|>"]}
    )
    teacher_lib.check_compatible(
        self.create_tempdir().full_path, teacher_tok, student_tok
    )

  def test_different_tokenizer_fails(self):
    teacher_tok = tokenizer_lib.build_char_tokenizer()
    student_tok = tokenizer_lib.build_char_tokenizer()
    student_tok.chat_template = "{{ messages }}"
    with self.assertRaisesRegex(ValueError, "tokenizers differ"):
      teacher_lib.check_compatible(
          self.create_tempdir().full_path, teacher_tok, student_tok
      )

  def test_block_diffusion_checkpoint_as_teacher_fails(self):
    directory = self.create_tempdir().full_path
    bd_config.save_settings(
        bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3),
        directory,
    )
    tok = tokenizer_lib.build_char_tokenizer()
    with self.assertRaisesRegex(ValueError, "block-diffusion checkpoint"):
      teacher_lib.check_compatible(directory, tok, tok)

  def test_an_sdar_student_may_have_the_pad_its_import_gave_it(self):
    # sdar_tiny's import moves its pad (<|endoftext|>, a stop id) to
    # <|pad|>; the AR model it would be distilled from keeps <|endoftext|>.
    data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
    template = os.path.join(
        data, "bd_formats", "sdar_tiny", "chat_template.jinja"
    )
    student = bd_formats.load_tokenizer(
        os.path.join(data, "bd_formats", "sdar_tiny"), template
    )
    teacher_dir = os.path.join(data, "hf", "q3_tied_hd32")
    teacher = tokenizer_lib.load_tokenizer(teacher_dir, template)
    self.assertEqual(
        (student.pad_token, teacher.pad_token),
        (bd_formats.PAD_TOKEN, "<|endoftext|>"),
    )
    teacher_lib.check_compatible(teacher_dir, teacher, student)
    # A pad of its own only where the teacher's pad is one of its stop ids.
    setattr(student, special_ids.CHECKPOINT_STOP_IDS_ATTR, ())
    with self.assertRaisesRegex(ValueError, "the tokenizers differ"):
      teacher_lib.check_compatible(teacher_dir, teacher, student)

  def test_sdar_and_fast_dllm_checkpoints_as_teacher_fail(self):
    tok = tokenizer_lib.build_char_tokenizer()
    for name, fmt in (("sdar_tiny", "sdar"), ("fast_dllm_v2_tiny", "fast")):
      directory = os.path.join(
          os.path.dirname(os.path.dirname(__file__)),
          "testdata",
          "bd_formats",
          name,
      )
      with self.assertRaisesRegex(
          ValueError, rf"^model\.teacher=.* in {fmt}\w* format"
      ):
        teacher_lib.check_compatible(directory, tok, tok)


if __name__ == "__main__":
  absltest.main()
