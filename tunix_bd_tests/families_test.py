# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion contract on every supported Tunix family.

Tiny random Qwen2 and Llama 3 (and Qwen3, the reference family): block size
1 is the causal model bit for bit, cached decoding equals cache-free, replay
reproduces the rollout, SFT lowers the loss; other models fail closed.
"""

from __future__ import annotations

import dataclasses
import types

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import numpy as np
import optax
from tunix.generate import utils as generate_utils
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import replayer
from tunix_bd.generate import denoise
from tunix_bd.sft import loss as loss_lib
from tunix_bd_tests import test_common

_VOCAB = 64
_MASK = 3
_PAD = 0
_FAMILIES = ("qwen2", "llama3")


def _bd(block_size=4, alignment=bd_config.SHIFTED):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )


def _prompts(rng, lengths):
  return [rng.integers(_MASK + 1, _VOCAB, n).tolist() for n in lengths]


class FamiliesTest(parameterized.TestCase):

  @parameterized.parameters(*_FAMILIES)
  def test_block_size_one_is_the_causal_model_bit_for_bit(self, family):
    model = test_common.tiny_family_model(family, _VOCAB)
    self.assertEqual(families.family(model.config), family)
    rng = np.random.default_rng(0)
    tokens = rng.integers(_MASK + 1, _VOCAB, (2, 11)).astype(np.int32)
    positions = np.broadcast_to(np.arange(11), (2, 11)).astype(np.int32)
    config = dataclasses.replace(
        _bd(1, bd_config.SAME_POSITION), layout=bd_config.SINGLE_CANVAS
    )
    got = diffusion_lm.diffusion_logits_fn(
        model, tokens, positions, None, config=config
    )
    causal = generate_utils.make_causal_attn_mask(np.ones((2, 11), bool), 11)
    want, _ = model(tokens, positions, None, causal)
    keep = np.arange(_VOCAB) != _MASK
    np.testing.assert_array_equal(
        np.asarray(got)[..., keep], np.asarray(want, np.float32)[..., keep]
    )

  @parameterized.parameters(*_FAMILIES)
  def test_cached_equals_cache_free_and_replay_reproduces(self, family):
    model = test_common.tiny_family_model(family, _VOCAB)
    bd = _bd()
    prompts = _prompts(np.random.default_rng(1), (5, 2, 8))
    outs = {}
    for use_cache in (False, True):
      config = denoise.DenoiseConfig(
          max_new_tokens=10,
          max_prompt_length=8,
          threshold=0.3,
          temperature=0.8,
          stop_ids=(7,),
          pad_id=_PAD,
          use_cache=use_cache,
      )
      outs[use_cache] = denoise.Denoiser(model, bd=bd, config=config)(
          prompts, seeds=[0, 1, 2]
      )
    cache_free, cached = outs[False], outs[True]
    self.assertGreater(cached.trace.action_step.max(), 0)
    np.testing.assert_array_equal(
        cached.completion_tokens, cache_free.completion_tokens
    )
    np.testing.assert_allclose(
        cached.trace.action_logp, cache_free.trace.action_logp, atol=1e-5
    )
    self.assertLessEqual(replayer.max_replay_error(model, cached.trace), 1e-5)

  @parameterized.parameters(*_FAMILIES)
  def test_sft_loss_decreases(self, family):
    model = test_common.tiny_family_model(family, _VOCAB)
    bd = _bd()
    rng = np.random.default_rng(2)
    tokens = rng.integers(_MASK + 1, 12, (4, 16)).astype(np.int32)
    tokens[:, 8:] = tokens[:, :8]  # A copy task the model can learn.
    positions = np.broadcast_to(np.arange(16), tokens.shape).astype(np.int32)
    corrupted = (rng.random(tokens.shape) < 0.5) & (positions >= 8)
    batch = dict(
        tokens=tokens,
        noisy_tokens=np.where(corrupted, _MASK, tokens),
        positions=positions,
        segment_ids=np.ones_like(tokens),
        corruption_mask=corrupted,
        loss_weights=corrupted.astype(np.float32),
        noise_level=np.full(tokens.shape, 0.5, np.float32),
        global_weight=np.full(4, corrupted.sum(), np.float32),
        accumulation_steps=np.ones(4, np.int32),
    )
    loss_fn = loss_lib.sft_loss_fn(bd)
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer):
      (loss, _), grads = nnx.value_and_grad(
          lambda m: loss_fn(m, **batch), has_aux=True
      )(model)
      optimizer.update(model, grads)
      return loss

    losses = [float(train_step(model, optimizer)) for _ in range(15)]
    self.assertLess(losses[-1], 0.8 * losses[0])

  def test_other_models_fail_closed_naming_the_families(self):
    other = types.SimpleNamespace(
        config=types.SimpleNamespace(vocab_size=_VOCAB),
        init_cache=lambda *a: None,
    )
    tokens = np.zeros((1, 4), np.int32)
    with self.assertRaisesRegex(ValueError, r"\['llama3', 'qwen2', 'qwen3'\]"):
      diffusion_lm.diffusion_logits_fn(
          other, tokens, tokens, None, config=_bd()
      )
    with self.assertRaisesRegex(ValueError, r"supported"):
      families.init_kv_cache(other, 1, 4, jax.numpy.float32)


if __name__ == "__main__":
  absltest.main()
