# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.loss on a tiny real Tunix Qwen3.

Covers the loss against a NumPy reference, the absence of leakage from later
blocks and padding, and fail-closed inputs. Gradient accumulation is in
sft/accumulation_test.py, training in sft/trainer_test.py.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import numpy as np
import optax
from tunix.sft import peft_trainer
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import sections
from tunix_bd.sft import batching
from tunix_bd.sft import corruption
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_EOS = _TOKENIZER.eos_token_id
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_VOCAB = len(_TOKENIZER)
_BLOCK = 8
_LENGTH = 48
_MODEL = test_common.JittedModel(test_common.tiny_qwen3(_VOCAB))


def _config(alignment=bd_config.SHIFTED, layout=bd_config.CLEAN_CONTEXT):
  return bd_config.BlockDiffusionConfig(
      block_size=_BLOCK, mask_token_id=_MASK, alignment=alignment, layout=layout
  )


def _data(num_examples=8, split="train", width=_LENGTH):
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=11
  )
  conversations = dataset_lib.embedded_conversations(mix, split, num_examples)
  return dataset_lib.tokenize(_TOKENIZER, conversations, width)


def _batches(
    config,
    k=1,
    complementary=True,
    weighting="inverse_t",
    data=None,
    batch_size=8,
    **kw,
):
  return batching.sft_batches(
      data or _data(),
      batch_size=batch_size,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.1,
          max_noise=0.9,
          complementary=complementary,
          loss_weighting=weighting,
      ),
      config=config,
      eos_id=_EOS,
      seed=0,
      gradient_accumulation_steps=k,
      **kw,
  )


def _loss(model, batch, config, num_noise_buckets=4):
  return loss_lib.sft_loss(
      model,
      **loss_lib.sft_model_inputs(batch),
      config=config,
      num_noise_buckets=num_noise_buckets,
  )


class SftLossTest(parameterized.TestCase):

  @parameterized.product(
      alignment=(bd_config.SAME_POSITION, bd_config.SHIFTED),
      layout=bd_config.LAYOUTS,
  )
  def test_loss_and_aux_match_a_numpy_reference(self, alignment, layout):
    config = _config(alignment, layout)
    batch = _batches(config, k=2)[1]
    value, aux = _loss(_MODEL, batch, config)
    rows = loss_lib.sft_rows(
        _MODEL,
        **{
            k: getattr(batch, k)
            for k in ("tokens", "noisy_tokens", "positions", "segment_ids")
        },
        config=config,
    )
    logits = np.asarray(lm_head.dense_logits(rows), np.float64)
    keep = np.arange(_VOCAB) != _MASK  # The mask token has probability 0.
    shifted = logits - logits[..., keep].max(-1, keepdims=True)
    log_z = np.log(np.exp(shifted[..., keep]).sum(-1))
    targets = batch.tokens
    nll = log_z - np.take_along_axis(shifted, targets[..., None], -1)[..., 0]
    mask = batch.corruption_mask
    weights = np.where(mask, batch.loss_weights, 0.0)
    want = 2 * (weights * nll).sum() / batch.global_weight[0]
    np.testing.assert_allclose(value, want, rtol=1e-5)
    self.assertLess(weights.sum(), batch.global_weight[0])  # k = 2.
    np.testing.assert_allclose(aux["total_weight"], weights.sum(), rtol=1e-6)
    self.assertEqual(float(aux["corrupted_tokens"]), mask.sum())
    correct = (logits.argmax(-1) == targets) & mask
    np.testing.assert_array_equal(
        aux["masked_accuracy"], [correct.sum(), mask.sum()]
    )
    bucket = np.minimum((batch.noise_level * 4).astype(int), 3)
    for b, name in enumerate(loss_lib.bucket_names(4)):
      sel = mask & (bucket == b)
      np.testing.assert_allclose(
          aux[name], [nll[sel].sum(), sel.sum()], rtol=1e-5, atol=1e-5
      )

  @parameterized.product(
      alignment=(bd_config.SAME_POSITION, bd_config.SHIFTED),
      layout=bd_config.LAYOUTS,
  )
  def test_later_blocks_and_padding_do_not_leak(self, alignment, layout):
    config = _config(alignment, layout)
    batch = _batches(config, complementary=False)[0]
    keys = ("tokens", "noisy_tokens", "positions", "segment_ids")
    inputs = {k: getattr(batch, k) for k in keys}
    logits = lambda inputs: np.asarray(
        lm_head.dense_logits(loss_lib.sft_rows(_MODEL, **inputs, config=config))
    )
    base = logits(inputs)
    self.assertTrue((batch.segment_ids == 0).any())  # Rows have padding.
    rng = np.random.default_rng(0)
    blocks = batch.positions // _BLOCK
    supervised = batch.corruption_mask
    num_blocks = _LENGTH // _BLOCK
    for cut in range(num_blocks - 1):
      later = blocks > cut
      noise = rng.integers(4, 100, later.shape)  # Real, non-mask ids.
      perturbed = dict(inputs)
      for key in ("tokens", "noisy_tokens"):
        perturbed[key] = np.where(later, noise, inputs[key]).astype(np.int32)
      got = logits(perturbed)
      check = supervised & ~later
      np.testing.assert_array_equal(got[check], base[check])
      # Control: the same perturbation does move the later positions.
      moved = supervised & later & (batch.segment_ids > 0)
      if moved.any():
        self.assertGreater(np.abs(got[moved] - base[moved]).max(), 1e-3)

  def test_model_inputs_fail_closed(self):
    batch = dataclasses.asdict(_batches(_config())[0])
    with self.assertRaisesRegex(ValueError, "needs an SftBatch, got dict"):
      loss_lib.sft_model_inputs(batch)
    with self.assertRaisesRegex(ValueError, "BlockDiffusionConfig"):
      loss_lib.sft_loss_fn({"block_size": 8})
    with self.assertRaisesRegex(ValueError, "num_noise_buckets"):
      loss_lib.sft_loss_fn(_config(), num_noise_buckets=0)


def _rel(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


class SftChunkedLossTest(parameterized.TestCase):
  """The chunked head (`logits_chunk`) gives the dense loss, at float32."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.models = {
        tied: test_common.tiny_qwen3(_VOCAB, tied=tied) for tied in (0, 1)
    }

  # A consumer check (the chunks themselves: `lm_head_test`): a chunk of 24
  # does not divide the 128 ids (the last chunk overlaps the one before).
  @parameterized.parameters(
      (bd_config.SHIFTED, bd_config.CLEAN_CONTEXT, True, 24),
  )
  def test_equals_the_dense_loss_and_gradients(
      self, alignment, layout, tied, chunk
  ):
    config = _config(alignment, layout)
    inputs = loss_lib.sft_model_inputs(_batches(config, k=2)[1])

    def value_and_grad(logits_chunk):
      loss_fn = loss_lib.sft_loss_fn(config, logits_chunk=logits_chunk)
      step = nnx.jit(nnx.value_and_grad(loss_fn, has_aux=True))
      (loss, aux), grads = step(self.models[tied], **inputs)
      return loss, aux, nnx.to_pure_dict(grads)

    want_loss, want_aux, want_grads = value_and_grad(None)
    got_loss, got_aux, got_grads = value_and_grad(chunk)
    self.assertLess(_rel(got_loss, want_loss), 1e-6)
    for name, want in want_aux.items():
      self.assertLess(_rel(got_aux[name], want), 1e-6, name)
    # The argmax agrees: the same masked accuracy, exactly.
    np.testing.assert_array_equal(
        got_aux["masked_accuracy"], want_aux["masked_accuracy"]
    )
    for path, want in jax.tree_util.tree_leaves_with_path(want_grads):
      got = got_grads
      for key in path:
        got = got[key.key]
      self.assertLess(_rel(got, want), 1e-6, jax.tree_util.keystr(path))

  def test_an_injected_logits_fn_works_with_the_chunked_head(self):
    # Its logits are the rows: scored in chunks, the same loss.
    config = _config(bd_config.SHIFTED, bd_config.SINGLE_CANVAS)
    batch = _batches(config, k=2)[1]
    injected = lambda *args, **kwargs: diffusion_lm.diffusion_logits_fn(
        *args, **kwargs
    )
    losses = [
        loss_lib.sft_loss_fn(config, logits_fn=fn, logits_chunk=chunk)(
            self.models[1], batch
        )
        for fn, chunk in ((injected, 24), (diffusion_lm.diffusion_rows, None))
    ]
    self.assertLess(_rel(losses[0][0], losses[1][0]), 1e-6)
    np.testing.assert_array_equal(
        losses[0][1]["masked_accuracy"], losses[1][1]["masked_accuracy"]
    )

  def test_fails_closed(self):
    with self.assertRaisesRegex(ValueError, "model.logits_chunk must be"):
      loss_lib.sft_loss_fn(_config(), logits_chunk=0)
    with self.assertRaisesRegex(ValueError, "injected logits_fn"):
      loss_lib.sft_loss_fn(
          _config(), scan_layers=True, logits_fn=lambda *a, **k: None
      )
    with self.assertRaisesRegex(ValueError, "model.scan_layers must be a bool"):
      loss_lib.sft_loss_fn(_config(), scan_layers="yes")
    with self.assertRaisesRegex(ValueError, "model.scan_layers must be a bool"):
      sections.SftModel(checkpoint="x", scan_layers=1)


class PackedRowTest(parameterized.TestCase):
  """A packed row is the sum of its examples, each run alone."""

  @parameterized.parameters(*bd_config.LAYOUTS)
  def test_loss_and_gradients_are_the_sum_of_its_examples_alone(self, layout):
    # Three examples (27, 34 and 31 tokens: blocks of 8 end at 32, 40 and
    # 32) fill one 112-token row; alone, each is a 112-token row too, so one
    # compiled step serves all four batches.
    config = _config(bd_config.SHIFTED, layout)
    data = _data(3, width=112)
    batches = lambda packing: _batches(
        config, data=data, batch_size=1, packing=packing, shuffle=False
    )
    packed = batches(True)[0]
    alone = [batches(False)[i] for i in range(3)]
    np.testing.assert_array_equal(packed.segment_ids.max(1), 3)
    # The same noise: each example's slice of the row is its row alone.
    start = 0
    for example in alone:
      end = start + int(example.segment_ids[0].sum())
      # Positions restart: they are those of the example alone.
      for key in corruption.FIELDS:
        if key != "segment_ids":
          np.testing.assert_array_equal(
              getattr(packed, key)[:, start:end],
              getattr(example, key)[:, : end - start],
          )
      start = end
    # One denominator for all, so the losses add up (`global_weight` is the
    # packed row's total weight, the sum of the three alone).
    weight = packed.global_weight
    np.testing.assert_allclose(
        sum(e.global_weight for e in alone), weight, rtol=1e-6
    )
    step = nnx.jit(
        nnx.value_and_grad(loss_lib.sft_loss_fn(config), has_aux=True)
    )
    model = test_common.tiny_qwen3(_VOCAB)

    def run(batch):
      (loss, aux), grads = step(model, batch=batch)
      return jax.tree.map(np.asarray, (loss, aux, nnx.to_pure_dict(grads)))

    got = run(packed)
    parts = [run(e.replace(global_weight=weight)) for e in alone]
    want = jax.tree.map(lambda *x: np.sum(np.asarray(x, np.float64), 0), *parts)
    self.assertLess(_rel(got[0], want[0]), 1e-6)
    for name, value in want[1].items():
      self.assertLess(_rel(got[1][name], value), 1e-6, name)
    for path, value in jax.tree_util.tree_leaves_with_path(want[2]):
      leaf = got[2]
      for key in path:
        leaf = leaf[key.key]
      self.assertLess(_rel(leaf, value), 1e-5, jax.tree_util.keystr(path))


class SftTrainerInputTest(absltest.TestCase):

  def test_batches_split_for_another_k_are_rejected(self):
    trainer = trainer_lib.DiffusionSftTrainer(
        test_common.tiny_qwen3(_VOCAB),
        optax.sgd(0.1),
        peft_trainer.TrainingConfig(eval_every_n_steps=100, max_steps=1),
        config=_config(),
    )
    with self.assertRaisesRegex(
        ValueError, r"split into \[2\].*gradient_accumulation_steps=1"
    ):
      trainer.train(_batches(_config(), k=2))
    with self.assertRaisesRegex(ValueError, "needs an SftBatch, got list"):
      trainer._prepare_inputs([1, 2])


if __name__ == "__main__":
  absltest.main()
