# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.lm_head: rows and the head in vocabulary chunks.

The model's hidden states times its head are its own logits bit for bit
(every family, tied and untied, with a KV cache, under LoRA); the chunked
log-probs and argmax equal the dense ones, of hidden rows and of logits
(chunks that do and do not divide the vocabulary, temperatures, the
excluded mask id), gradients included; and the target-aligned hidden rows
give the model's own aligned logits.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen2 import model as qwen2_lib
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import scoring
from tunix_bd.models import lora as lora_lib
from tunix_bd_tests import test_common

_VOCAB = 100
_MASK = 3
_BATCH, _LENGTH = 2, 12


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(_MASK + 1, _VOCAB, (_BATCH, _LENGTH)).astype(np.int32)
  positions = np.broadcast_to(np.arange(_LENGTH), tokens.shape)
  causal = np.tril(np.ones((_LENGTH, _LENGTH), bool))
  return (
      tokens,
      positions.astype(np.int32),
      np.broadcast_to(causal, (_BATCH, _LENGTH, _LENGTH)),
  )


def _relative_error(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


class HiddenStatesTest(parameterized.TestCase):

  @parameterized.parameters(
      ("qwen3", False), ("qwen3", True), ("qwen2", False), ("qwen2", True)
  )
  def test_head_of_hidden_states_is_the_models_logits(self, family, tied):
    if family == "qwen3":
      model = test_common.tiny_qwen3(_VOCAB, tied=tied)
    else:
      config = dataclasses.replace(
          test_common.tiny_family_model("qwen2", _VOCAB).config,
          use_tied_embedding=tied,
      )
      model = test_common.init_tunix_model(qwen2_lib.Qwen2, config)
    tokens, positions, mask = _inputs()
    logits, _ = model(tokens, positions, None, mask)
    hidden, _ = compat.final_hidden_states(model, tokens, positions, None, mask)
    head = lm_head.model_head(model)
    self.assertEqual(head.vocab_axis, 0 if tied else 1)
    rows = lm_head.Rows(hidden, head)
    np.testing.assert_array_equal(lm_head.dense_logits(rows), logits)

  def test_with_a_cache_and_under_lora(self):
    model = lora_lib.apply_lora(
        test_common.tiny_qwen3(_VOCAB), rank=2, alpha=2.0
    )
    # Move the adapters off zero, so that they change the logits.
    state = nnx.state(model, nnx.LoRAParam)
    nnx.update(model, jax.tree.map(lambda x: x + 0.1, state))
    tokens, positions, mask = _inputs()
    cache = model.init_cache(_BATCH, _LENGTH, jnp.float32)
    logits, want_cache = model(tokens, positions, cache, mask)
    hidden, got_cache = compat.final_hidden_states(
        model, tokens, positions, cache, mask
    )
    rows = lm_head.Rows(hidden, lm_head.model_head(model))
    np.testing.assert_array_equal(lm_head.dense_logits(rows), logits)
    jax.tree.map(np.testing.assert_array_equal, got_cache, want_cache)
    self.assertEmpty(nnx.state(model, nnx.Intermediate))  # Nothing left sown.

  def test_fails_closed(self):
    model = test_common.tiny_qwen3(_VOCAB)
    with self.assertRaisesRegex(ValueError, "mask_token_id=100 is outside"):
      lm_head.model_head(model, _VOCAB)
    lora = lora_lib.apply_lora(
        model, rank=2, alpha=2.0, module_path=".*lm_head"
    )
    with self.assertRaisesRegex(ValueError, "lora.module_path matches"):
      lm_head.model_head(lora)
    if "0.1.7" in compat.TUNIX_VERSION:  # Tunix main's Llama 3 has the flag.
      llama = test_common.tiny_family_model("llama3", _VOCAB)
      tokens, positions, mask = _inputs()
      with self.assertRaisesRegex(ValueError, "model.logits_chunk=0"):
        compat.final_hidden_states(llama, tokens, positions, None, mask)


class TokenStatsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    rng = np.random.default_rng(1)
    cls.hidden = jnp.asarray(rng.standard_normal((_BATCH, _LENGTH, 32)))
    cls.hidden = cls.hidden.astype(jnp.float32)
    targets = rng.integers(0, _VOCAB, (_BATCH, _LENGTH))
    targets[0, 0] = _MASK  # An excluded target: probability 0.
    cls.targets = jnp.asarray(targets, jnp.int32)

  # Chunks that do not divide the vocabulary (7, 25: an overlapping last
  # chunk), that do (20), and of the whole vocabulary or more.
  @parameterized.parameters(
      (0, 7, 1.0), (1, 25, 0.7), (0, 20, 0.7), (1, 100, 1.0), (0, 512, 0.7)
  )
  def test_equals_the_dense_log_probs(self, vocab_axis, chunk, temperature):
    rng = np.random.default_rng(vocab_axis)
    shape = (_VOCAB, 32) if vocab_axis == 0 else (32, _VOCAB)
    weight = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    # A tie: the first of equal maxima is the argmax, across chunks too.
    weight = weight.at[(slice(None), 90) if vocab_axis else 90].set(
        weight[(slice(None), 10) if vocab_axis else 10]
    )

    def dense(weight, hidden):
      head = lm_head.Head(weight, vocab_axis, None, (_MASK,))
      logits = lm_head.dense_logits(lm_head.Rows(hidden, head))
      log_probs = scoring.token_log_probs(logits, self.targets, temperature)
      return log_probs, jnp.argmax(logits, axis=-1)

    def chunked(weight, hidden):
      head = lm_head.Head(weight, vocab_axis, None, (_MASK,))
      return lm_head.token_stats(
          lm_head.Rows(hidden, head),
          self.targets,
          temperature=temperature,
          chunk=chunk,
      )

    want, want_argmax = dense(weight, self.hidden)
    got, got_argmax = chunked(weight, self.hidden)
    np.testing.assert_array_equal(got_argmax, want_argmax)
    finite = self.targets != _MASK
    self.assertLess(_relative_error(got[finite], want[finite]), 1e-6)
    self.assertLess(float(got[0, 0]), -1e29)  # The mask token's.
    # Gradients of a weighted sum, through both the weight and the rows.
    ramp = jnp.linspace(0.5, 2.0, finite.size).reshape(finite.shape)
    weights = jnp.where(finite, ramp, 0.0)
    loss = lambda fn: lambda w, h: jnp.sum(weights * fn(w, h)[0])
    want_grads = jax.grad(loss(dense), (0, 1))(weight, self.hidden)
    got_grads = jax.grad(loss(chunked), (0, 1))(weight, self.hidden)
    for got_grad, want_grad in zip(got_grads, want_grads):
      self.assertLess(_relative_error(got_grad, want_grad), 1e-6)
    # Rows that are logits already (an injected call's): the same, chunked.
    head = lm_head.Head(weight, vocab_axis, None, (_MASK,))
    logits = lm_head.Rows(lm_head.dense_logits(lm_head.Rows(self.hidden, head)))
    got, got_argmax = lm_head.token_stats(
        logits, self.targets, temperature=temperature, chunk=chunk
    )
    np.testing.assert_array_equal(got_argmax, want_argmax)
    self.assertLess(_relative_error(got[finite], want[finite]), 1e-6)

  def test_fails_closed(self):
    head = lm_head.Head(jnp.zeros((_VOCAB, 32)), 0, None, ())
    rows = lm_head.Rows(self.hidden, head)
    with self.assertRaisesRegex(ValueError, "model.logits_chunk must be"):
      lm_head.token_stats(rows, self.targets, chunk=0)
    with self.assertRaisesRegex(ValueError, "targets have shape"):
      lm_head.token_stats(rows, self.targets[:, 1:])
    with self.assertRaisesRegex(ValueError, "temperature"):
      lm_head.token_stats(rows, self.targets, temperature=0.0)


class RowsTest(parameterized.TestCase):

  @parameterized.parameters(
      (bd_config.SHIFTED, bd_config.CLEAN_CONTEXT),
      (bd_config.SAME_POSITION, bd_config.SINGLE_CANVAS),
  )
  def test_hidden_rows_give_the_models_aligned_logits(self, alignment, layout):
    model = test_common.tiny_qwen3(_VOCAB, tied=True)
    config = bd_config.BlockDiffusionConfig(
        block_size=4, mask_token_id=_MASK, alignment=alignment, layout=layout
    )
    tokens, positions, _ = _inputs()
    noisy = np.where(np.arange(_LENGTH) % 3 == 0, _MASK, tokens)
    segments = np.ones_like(tokens)
    segments[1, :2] = 0  # Left padding.
    clean = tokens if layout == bd_config.CLEAN_CONTEXT else None
    args = (noisy, positions, segments)
    rows = diffusion_lm.diffusion_rows(
        model, *args, config=config, clean_tokens=clean
    )
    self.assertEqual(rows.values.shape, (_BATCH, _LENGTH, 32))
    # Called as a plain function, the model gives its own logits as rows.
    logits = diffusion_lm.diffusion_rows(
        lambda *call: model(*call), *args, config=config, clean_tokens=clean
    )
    self.assertIsNone(logits.head)
    np.testing.assert_array_equal(lm_head.dense_logits(rows), logits.values)


if __name__ == "__main__":
  absltest.main()
