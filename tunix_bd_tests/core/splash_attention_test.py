# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.splash_attention, the kernel in interpret mode.

The Splash mask against the dense masks of `masks`; the SFT loss, its aux
and its gradients through the kernel against the dense Tunix forward on
packed, right-padded SFT batches of both layouts; the refusals.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask
import jax.numpy as jnp
import numpy as np
import optax
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import masks
from tunix_bd.core import splash_attention
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import lora
from tunix_bd.models import sections
from tunix_bd.sft import batching
from tunix_bd.sft import corruption
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_VOCAB = len(_TOKENIZER)


def _config(layout, block_size=8):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, layout=layout
  )


def _rel(got, want):
  got, want = np.asarray(got), np.asarray(want)
  return float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))


class SplashMaskTest(parameterized.TestCase):

  @parameterized.product(
      layout=bd_config.LAYOUTS, block_size=(1, 3, 8), copy=(8, 24)
  )
  def test_matches_dense_block_by_block(self, layout, block_size, copy):
    # Positions are the physical index of each copy; a copy is whole blocks
    # under clean_context (`hidden_states` pads it so).
    clean_context = layout == bd_config.CLEAN_CONTEXT
    if clean_context and copy % block_size:
      self.skipTest("a [noisy ; clean] copy is whole blocks")
    positions = np.arange(copy)[None]
    if clean_context:
      mask = splash_attention.BlockDiffusionSplashMask(
          2 * copy, block_size, copy
      )
      dense = masks.clean_context_mask(positions, block_size)[0]
    else:
      mask = splash_attention.BlockDiffusionSplashMask(copy, block_size)
      dense = masks.block_causal_mask(positions, positions, block_size)[0]
    dense = np.asarray(dense)
    np.testing.assert_array_equal(mask[:, :], dense)
    # Splash reads the mask tile by tile; the last tiles are partial.
    tile, (q_len, kv_len) = 5, dense.shape
    for q0 in range(0, q_len, tile):
      for k0 in range(0, kv_len, tile):
        rows = slice(q0, min(q0 + tile, q_len))
        cols = slice(k0, min(k0 + tile, kv_len))
        np.testing.assert_array_equal(mask[rows, cols], dense[rows, cols])

  def test_equality_hash_and_bad_copy(self):
    a = splash_attention.BlockDiffusionSplashMask(32, 4, 16)
    self.assertEqual(a, splash_attention.BlockDiffusionSplashMask(32, 4, 16))
    self.assertEqual(
        hash(a), hash(splash_attention.BlockDiffusionSplashMask(32, 4, 16))
    )
    self.assertNotEqual(a, splash_attention.BlockDiffusionSplashMask(32, 4))
    self.assertNotEqual(a, splash_attention.BlockDiffusionSplashMask(32, 2, 16))
    with self.assertRaisesRegex(ValueError, "copy_length=12"):
      splash_attention.BlockDiffusionSplashMask(24, 8, 12)

  def test_kernel_matches_dense_attention_with_packing(self):
    # Documents that start at a multiple of the block size keep their
    # blocks in physical index, with positions restarting at 0.
    heads, length, dim, block_size = 2, 256, 128, 48
    doc_lengths = (144, 112)
    segments = np.concatenate(
        [np.full(n, d + 1) for d, n in enumerate(doc_lengths)]
    ).astype(np.int32)
    positions = np.concatenate([np.arange(n) for n in doc_lengths])
    mask = splash_attention.BlockDiffusionSplashMask(length, block_size)
    kernel = splash.make_splash_mha(
        splash_mask.MultiHeadMask([mask] * heads),
        block_sizes=splash.BlockSizes(block_q=128, block_kv=128),
        head_shards=1,
        q_seq_shards=1,
        interpret=True,
    )
    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(key, (heads, length, dim)) for key in keys)
    got = kernel(
        q, k, v, segment_ids=splash.SegmentIds(q=segments, kv=segments)
    )
    dense = masks.block_causal_mask(
        positions[None],
        positions[None],
        block_size,
        q_segment_ids=segments[None],
        kv_segment_ids=segments[None],
    )[0]
    scores = jnp.where(dense, jnp.einsum("hqd,hkd->hqk", q, k), -1e30)
    want = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def _batch(config, length):
  """One packed SFT micro-batch of 2 right-padded rows, `length` tokens wide.

  4 examples of 27 to 37 tokens, 2 a row: the second starts at a block
  boundary, its positions from 0.
  """
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=3
  )
  conversations = dataset_lib.embedded_conversations(mix, "train", 4)
  batches = batching.sft_batches(
      dataset_lib.tokenize(_TOKENIZER, conversations, length),
      batch_size=2,
      packing=True,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.3, max_noise=0.9, complementary=False
      ),
      config=config,
      eos_id=_TOKENIZER.eos_token_id,
      seed=0,
  )
  return loss_lib.sft_model_inputs(batches[0])


class SplashSftLossTest(parameterized.TestCase):
  """The SFT loss through the kernel is the dense one, gradients included."""

  # The single canvas is 96 tokens (padded to 128); the [noisy ; clean] row
  # 2 x 80, with remat and 5-token blocks, which do not divide Splash's
  # 128-token tiles (each copy is padded to 640); the tied head on one, the
  # chunked head on the other. Both rows pack 2 examples.
  @parameterized.parameters(
      (bd_config.SINGLE_CANVAS, 8, 96, "none", False, None),
      (bd_config.CLEAN_CONTEXT, 5, 80, "decoder", True, 48),
  )
  def test_loss_aux_and_gradients_equal_the_dense_path(
      self, layout, block_size, length, remat, tied, logits_chunk
  ):
    model_config = test_common.tiny_qwen3_config(_VOCAB, tied=tied)
    model = test_common.init_qwen3(
        dataclasses.replace(
            model_config,
            remat_config=families.remat_config(model_config, remat),
        ),
        seed=1,
    )
    config = _config(layout, block_size)
    inputs = _batch(config, length)
    self.assertGreater(int(np.sum(inputs["batch"].segment_ids == 0)), 0)
    np.testing.assert_array_equal(inputs["batch"].segment_ids.max(1), 2)

    def value_and_grad(attention):
      loss_fn = loss_lib.sft_loss_fn(
          config, logits_chunk=logits_chunk, attention=attention
      )
      step = nnx.jit(nnx.value_and_grad(loss_fn, has_aux=True))
      (loss, aux), grads = step(model, **inputs)
      return loss, aux, nnx.to_pure_dict(grads)

    want_loss, want_aux, want_grads = value_and_grad("dense")
    got_loss, got_aux, got_grads = value_and_grad("splash")
    self.assertLess(_rel(got_loss, want_loss), 1e-5)
    for name, want in want_aux.items():
      self.assertLess(_rel(got_aux[name], want), 1e-5, name)
    for path, want in jax.tree_util.tree_leaves_with_path(want_grads):
      got = got_grads
      for key in path:
        got = got[key.key]
      self.assertLess(_rel(got, want), 1e-4, jax.tree_util.keystr(path))


class FailClosedTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = test_common.tiny_qwen3(_VOCAB)

  def _logits(self, model, positions, segment_ids, jit=False):
    config = _config(bd_config.SINGLE_CANVAS)
    tokens = jnp.ones(positions.shape, jnp.int32)

    def call(positions):
      return diffusion_lm.diffusion_logits_fn(
          model,
          tokens,
          positions,
          segment_ids,
          config=config,
          attention="splash",
      )

    return (jax.jit(call) if jit else call)(positions)

  def test_positions_off_the_physical_index_are_refused(self):
    # Left padding by 3: real positions are index - 3.
    segments = jnp.asarray([[0] * 3 + [1] * 13])
    positions = jnp.maximum(jnp.arange(16) - 3, 0)[None]
    with self.assertRaisesRegex(ValueError, "index in its copy"):
      self._logits(self.model, positions, segments)
    # Packed documents must each start at a block boundary (8 tokens) and
    # keep their blocks in order.
    for docs, starts in (
        ([1] * 5 + [2] * 11, [*range(5), *range(11)]),
        ([1] * 16, [*range(8, 16), *range(8)]),
    ):
      with self.assertRaisesRegex(ValueError, "index in its copy"):
        self._logits(self.model, jnp.asarray([starts]), jnp.asarray([docs]))
    # Traced positions cannot raise: every real token's logits are NaN.
    logits = self._logits(self.model, positions, segments, jit=True)
    self.assertTrue(np.isnan(logits[0, 4:, 0]).all())
    # Pads' positions do not matter.
    right_padded = jnp.where(jnp.arange(16) < 13, jnp.arange(16), 99)[None]
    logits = self._logits(
        self.model, right_padded, jnp.asarray([[1] * 13 + [0] * 3])
    )
    self.assertTrue(np.isfinite(logits).all())

  def test_other_models_and_settings_are_refused(self):
    with self.assertRaisesRegex(ValueError, "model.attention='splash'.*Qwen3"):
      splash_attention.check_model(test_common.tiny_family_model("qwen2"))
    lora_model = lora.apply_lora(
        test_common.tiny_qwen3(_VOCAB), rank=2, alpha=2.0
    )
    with self.assertRaisesRegex(ValueError, "model.attention='splash'.*LoRA"):
      # The trainer refuses before any step.
      trainer_lib.DiffusionSftTrainer(
          lora_model,
          optax.adam(1e-2),
          compat.TrainingConfig(eval_every_n_steps=1, max_steps=1),
          config=_config(bd_config.SINGLE_CANVAS),
          attention="splash",
      )
    with self.assertRaisesRegex(ValueError, "model.attention must be one of"):
      loss_lib.sft_loss_fn(_config(bd_config.SINGLE_CANVAS), attention="flash")
    with self.assertRaisesRegex(ValueError, "injected logits_fn"):
      loss_lib.sft_loss_fn(
          _config(bd_config.SINGLE_CANVAS),
          attention="splash",
          logits_fn=lambda *a, **k: None,
      )
    with self.assertRaisesRegex(ValueError, "model.sft_loss='tunix_bd'"):
      sections.SftModel(checkpoint="x", attention="splash", sft_loss="tunix")
    with self.assertRaisesRegex(ValueError, "model.attention must be one of"):
      sections.SftModel(checkpoint="x", attention="flash")


if __name__ == "__main__":
  absltest.main()
