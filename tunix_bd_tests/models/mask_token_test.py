# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.mask_token on tiny real Qwen3 models."""

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import mask_token
from tunix_bd_tests import test_common

_TOKENIZER_SIZE = tokenizer_lib.VOCAB_SIZE  # 128 ids.
_NEW_TOKEN = "<|bd_mask|>"


def _tiny_qwen3(vocab_size: int, tied: bool = False) -> qwen3_lib.Qwen3:
  return test_common.tiny_qwen3(
      vocab_size=vocab_size, seed=vocab_size + tied, tied=tied
  )


def _params(model: qwen3_lib.Qwen3) -> dict[str, np.ndarray]:
  flat = jax.tree_util.tree_flatten_with_path(nnx.state(model).to_pure_dict())
  return {jax.tree_util.keystr(p): np.asarray(v) for p, v in flat[0]}


@jax.jit
def _forward(graphdef, state, tokens):
  length = tokens.shape[1]
  positions = jnp.broadcast_to(jnp.arange(length), tokens.shape)
  causal = jnp.tril(jnp.ones((length, length), bool))[None]
  return nnx.merge(graphdef, state)(tokens, positions, None, causal)[0]


def _logits(model: qwen3_lib.Qwen3, tokens: np.ndarray) -> np.ndarray:
  return np.asarray(_forward(*nnx.split(model), tokens))


class ResizeVocabTest(parameterized.TestCase):

  @parameterized.parameters(False, True)
  def test_existing_rows_and_old_logits_are_unchanged(self, tied):
    model = _tiny_qwen3(64, tied)
    before = _params(model)
    new_model, new_config = mask_token.resize_vocab(model)
    after = _params(new_model)

    self.assertEqual(new_config.vocab_size, 65)
    self.assertEqual(new_model.config, new_config)
    self.assertEqual(model.config.vocab_size, 64)
    self.assertEqual(_params(model).keys(), before.keys())
    self.assertEqual(after.keys(), before.keys())
    embedding = "['embedder']['input_embedding']"
    head = "['lm_head']['w']"
    for name, old in before.items():
      new = after[name]
      if name == embedding:
        np.testing.assert_array_equal(new[:64], old)
        np.testing.assert_allclose(
            new[64:],
            old.mean(0, keepdims=True),
            atol=1e-7,
        )
      elif name == head:
        np.testing.assert_array_equal(new[:, :64], old)
        np.testing.assert_allclose(
            new[:, 64:],
            old.mean(1, keepdims=True),
            atol=1e-7,
        )
      else:
        np.testing.assert_array_equal(new, old, err_msg=name)
      self.assertEqual(new.dtype, old.dtype)
    self.assertEqual(head in before, not tied)

    tokens = np.random.default_rng(0).integers(0, 64, (2, 9))
    old_logits = _logits(model, tokens)
    new_logits = _logits(new_model, tokens)
    self.assertEqual(new_logits.shape, (2, 9, 65))
    np.testing.assert_allclose(
        new_logits[..., :64], old_logits, atol=1e-6, rtol=1e-6
    )
    # The new id is a real input now.
    self.assertTrue(np.isfinite(_logits(new_model, tokens + 1)).all())

  def test_fails_closed(self):
    model = _tiny_qwen3(64)
    with self.assertRaisesRegex(ValueError, "supports Tunix Qwen3"):
      mask_token.resize_vocab(object())
    model.extra = nnx.Param(jnp.zeros(3))  # Like a LoRA param.
    with self.assertRaisesRegex(ValueError, "does not match a plain model"):
      mask_token.resize_vocab(model)


class TokenizerTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tokenizer = tokenizer_lib.build_char_tokenizer()
    self.char_id = self.tokenizer.convert_tokens_to_ids("a")

  def test_reserved_tokens_resolve(self):
    tok = self.tokenizer
    self.assertEqual(
        mask_token.resolve_reserved_mask_id(
            tok, tokenizer_lib.MASK_TOKEN, vocab_size=_TOKENIZER_SIZE
        ),
        tok.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN),
    )
    self.assertEqual(
        mask_token.resolve_reserved_mask_id(
            tok, "<|reserved_2|>", vocab_size=_TOKENIZER_SIZE
        ),
        tok.convert_tokens_to_ids("<|reserved_2|>"),
    )
    # An embedding row past the tokenizer: never produced by it.
    self.assertEqual(
        mask_token.resolve_reserved_mask_id(tok, 150, vocab_size=160), 150
    )

  def test_bad_reserved_tokens_fail_closed(self):
    tok = self.tokenizer
    eos = tok.eos_token_id
    reserved = tok.convert_tokens_to_ids("<|reserved_2|>")
    cases = [
        ("a", {}, "not a special/added token"),
        ("<|nope|>", {}, "not a special/added token"),
        (self.char_id, {}, "ordinary text token"),
        (tokenizer_lib.PAD_TOKEN, {}, "pad_token_id"),
        (eos, {}, "eos_token_id"),
        (tok.unk_token_id, {}, "unk_token_id"),
        ("<|reserved_2|>", {"stop_ids": (eos, reserved)}, r"stop_ids\[1\]"),
        (_TOKENIZER_SIZE, {}, r"outside the model vocabulary \[0, 128\)"),
        (-1, {}, "outside the model vocabulary"),
        (True, {}, "must be a str or int"),
    ]
    for mask, kwargs, message in cases:
      with self.subTest(mask=mask):
        with self.assertRaisesRegex(ValueError, message):
          mask_token.resolve_reserved_mask_id(
              tok, mask, vocab_size=_TOKENIZER_SIZE, **kwargs
          )


class ProvisionTest(absltest.TestCase):

  def test_existing_token_reuses_its_row(self):
    tok = tokenizer_lib.build_char_tokenizer()
    model = _tiny_qwen3(_TOKENIZER_SIZE)
    got, config, mask_id = mask_token.provision_mask_token(
        model, tok, tokenizer_lib.MASK_TOKEN
    )
    self.assertIs(got, model)
    self.assertEqual(mask_id, tok.convert_tokens_to_ids("<|mask|>"))
    self.assertEqual(config.vocab_size, _TOKENIZER_SIZE)
    self.assertEqual((tok.mask_token, tok.mask_token_id), ("<|mask|>", mask_id))

  def test_new_token_adds_a_row(self):
    tok = tokenizer_lib.build_char_tokenizer()
    model = _tiny_qwen3(_TOKENIZER_SIZE)
    got, config, mask_id = mask_token.provision_mask_token(
        model, tok, _NEW_TOKEN
    )
    self.assertEqual(mask_id, _TOKENIZER_SIZE)
    self.assertEqual(config.vocab_size, _TOKENIZER_SIZE + 1)
    self.assertEqual(
        got.embedder.input_embedding.shape, (_TOKENIZER_SIZE + 1, 32)
    )
    self.assertEqual(tok.convert_tokens_to_ids(_NEW_TOKEN), mask_id)
    self.assertEqual((tok.mask_token, tok.mask_token_id), (_NEW_TOKEN, mask_id))
    self.assertEqual(
        tok.encode("a" + _NEW_TOKEN), [tok.encode("a")[0], mask_id]
    )
    # Earlier special tokens stay special.
    self.assertIn(tokenizer_lib.MASK_TOKEN, tok.all_special_tokens)
    bd_config.BlockDiffusionConfig(4, mask_id).validate_for_model(
        config, pad_id=tok.pad_token_id, eos_id=tok.eos_token_id
    )

  def test_new_token_reuses_an_unused_row(self):
    tok = tokenizer_lib.build_char_tokenizer()
    model = _tiny_qwen3(160)
    got, config, mask_id = mask_token.provision_mask_token(
        model, tok, _NEW_TOKEN
    )
    self.assertIs(got, model)
    self.assertEqual((mask_id, config.vocab_size), (_TOKENIZER_SIZE, 160))
    self.assertEqual(tok.convert_tokens_to_ids(_NEW_TOKEN), mask_id)

  def test_registering_keeps_ids_and_refuses_ordinary_tokens(self):
    tok = tokenizer_lib.build_char_tokenizer()
    text = "<|im_start|>user\nsort 31<|im_end|>"
    ids = tok.encode(text)
    reserved = tok.convert_tokens_to_ids("<|reserved_0|>")
    self.assertEqual(
        mask_token.register_mask_token(tok, reserved), "<|reserved_0|>"
    )
    self.assertEqual((tok.mask_token_id, len(tok)), (reserved, _TOKENIZER_SIZE))
    self.assertEqual(tok.encode(text), ids)
    # A row no string encodes to has no string to name.
    self.assertIsNone(mask_token.register_mask_token(tok, _TOKENIZER_SIZE))
    with self.assertRaisesRegex(ValueError, "ordinary text token"):
      mask_token.register_mask_token(tok, tok.convert_tokens_to_ids("s"))

  def test_tokenizer_larger_than_model_fails_closed(self):
    tok = tokenizer_lib.build_char_tokenizer()
    with self.assertRaisesRegex(ValueError, "only 100 embedding rows"):
      mask_token.provision_mask_token(_tiny_qwen3(100), tok, _NEW_TOKEN)
    self.assertLen(tok, _TOKENIZER_SIZE)


class EmbeddedTokenizerAndBdTest(absltest.TestCase):

  def test_settings_sit_on_the_reserved_mask_token(self):
    tokenizer, bd = mask_token.embedded_tokenizer_and_bd(
        block_size=4, layout=bd_config.SINGLE_CANVAS
    )
    self.assertEqual(
        bd.mask_token_id,
        tokenizer.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN),
    )
    self.assertLess(bd.mask_token_id, tokenizer_lib.VOCAB_SIZE)
    self.assertEqual((bd.block_size, bd.layout), (4, bd_config.SINGLE_CANVAS))

  def test_bad_settings_fail_closed(self):
    with self.assertRaisesRegex(ValueError, "block_size"):
      mask_token.embedded_tokenizer_and_bd(block_size=0)


if __name__ == "__main__":
  absltest.main()
