# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.loss on a tiny real Tunix Qwen3.

Covers the loss against a NumPy reference, the absence of leakage from later
blocks, exact gradient accumulation through a real `PeftTrainer`, and the
trainer's fail-closed input checks.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tunix.sft import peft_trainer
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_config
from tunix_bd.sft import batching
from tunix_bd.sft import corruption
from tunix_bd.sft import loss as loss_lib
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


def _data(num_examples=8, split="train"):
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=11
  )
  conversations = dataset_lib.embedded_conversations(mix, split, num_examples)
  return dataset_lib.tokenize(_TOKENIZER, conversations, _LENGTH)


def _batches(config, k=1, complementary=True, weighting="inverse_t", **kw):
  return batching.sft_batches(
      _data(),
      batch_size=8,
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
    logits = np.asarray(
        loss_lib.sft_logits(
            _MODEL,
            **{
                k: batch[k]
                for k in ("tokens", "noisy_tokens", "positions", "segment_ids")
            },
            config=config,
        ),
        np.float64,
    )
    keep = np.arange(_VOCAB) != _MASK  # The mask token has probability 0.
    shifted = logits - logits[..., keep].max(-1, keepdims=True)
    log_z = np.log(np.exp(shifted[..., keep]).sum(-1))
    targets = batch["tokens"]
    nll = log_z - np.take_along_axis(shifted, targets[..., None], -1)[..., 0]
    mask = batch["corruption_mask"]
    weights = np.where(mask, batch["loss_weights"], 0.0)
    want = 2 * (weights * nll).sum() / batch["global_weight"][0]
    np.testing.assert_allclose(value, want, rtol=1e-5)
    self.assertLess(weights.sum(), batch["global_weight"][0])  # k = 2.
    np.testing.assert_allclose(aux["total_weight"], weights.sum(), rtol=1e-6)
    self.assertEqual(float(aux["corrupted_tokens"]), mask.sum())
    correct = (logits.argmax(-1) == targets) & mask
    np.testing.assert_array_equal(aux["masked_accuracy"], [correct.sum(), mask.sum()])
    bucket = np.minimum((batch["noise_level"] * 4).astype(int), 3)
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
    inputs = {k: batch[k] for k in keys}
    base = np.asarray(loss_lib.sft_logits(_MODEL, **inputs, config=config))
    self.assertTrue((batch["segment_ids"] == 0).any())  # Rows have padding.
    rng = np.random.default_rng(0)
    blocks = batch["positions"] // _BLOCK
    supervised = batch["corruption_mask"]
    num_blocks = _LENGTH // _BLOCK
    for cut in range(num_blocks - 1):
      later = blocks > cut
      noise = rng.integers(4, 100, later.shape)  # Real, non-mask ids.
      perturbed = dict(inputs)
      for key in ("tokens", "noisy_tokens"):
        perturbed[key] = np.where(later, noise, inputs[key]).astype(np.int32)
      got = np.asarray(
          loss_lib.sft_logits(_MODEL, **perturbed, config=config)
      )
      check = supervised & ~later
      np.testing.assert_array_equal(got[check], base[check])
      # Control: the same perturbation does move the later positions.
      moved = supervised & later & (batch["segment_ids"] > 0)
      if moved.any():
        self.assertGreater(np.abs(got[moved] - base[moved]).max(), 1e-3)

  def test_model_inputs_fail_closed(self):
    batch = dict(_batches(_config())[0])
    del batch["global_weight"]
    with self.assertRaisesRegex(ValueError, "global_weight"):
      loss_lib.sft_model_inputs(batch)
    trainer = peft_trainer.PeftTrainer(
        test_common.tiny_qwen3(_VOCAB),
        optax.sgd(0.1),
        peft_trainer.TrainingConfig(eval_every_n_steps=10),
    )
    with self.assertRaisesRegex(ValueError, "BlockDiffusionConfig"):
      loss_lib.configure(trainer, {"block_size": 8})
    with self.assertRaisesRegex(ValueError, "num_noise_buckets"):
      loss_lib.configure(trainer, _config(), num_noise_buckets=0)


def _params(model) -> dict[str, np.ndarray]:
  flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
  return {"/".join(map(str, path)): np.array(v[...]) for path, v in flat}


def _set_params(model, params: dict[str, np.ndarray]) -> None:
  state = nnx.state(model, nnx.Param)
  for path, variable in nnx.to_flat_state(state):
    variable[...] = jnp.asarray(params["/".join(map(str, path))])
  nnx.update(model, state)


def _mean_of_micro_batch_means(batch):
  """Rewrites a micro-batch so the loss divides by its own weight only.

  With `global_weight` = k * own weight, each micro-batch loss is its own
  weighted mean, and MultiSteps averages those means: the naive scheme.
  """
  batch = dict(batch)
  own = np.where(batch["corruption_mask"], batch["loss_weights"], 0).sum()
  batch["global_weight"] = np.full_like(
      batch["global_weight"], own * batch["accumulation_steps"][0]
  )
  return batch


class GradientAccumulationTest(absltest.TestCase):
  """k micro-batches must update exactly like one batch of k times the size."""

  def test_accumulated_update_equals_one_big_batch(self):
    # The cheapest forward to compile; exactness does not depend on it.
    config = _config(bd_config.SAME_POSITION, bd_config.SINGLE_CANVAS)
    model_config = test_common.tiny_qwen3_config(_VOCAB)
    before = _params(test_common.init_qwen3(model_config, seed=1, scale=0.1))
    updates = {}
    for k in (1, 2, 4):
      model = test_common.init_qwen3(model_config, seed=1, scale=0.1)
      trainer = loss_lib.DiffusionSftTrainer(
          model,
          optax.sgd(1.0),
          peft_trainer.TrainingConfig(
              eval_every_n_steps=100, gradient_accumulation_steps=k
          ),
          config=config,
      )
      # Managed externally: no skipping, no closing; it runs every item.
      trainer.is_managed_externally = True
      micro = list(_batches(config, k=k, num_epochs=1))[:k]
      trainer.train(micro)
      self.assertEqual(trainer.train_steps, 1)
      updates[k] = _params(model)
      if k == 1:
        continue
      # Micro-batches differ in corrupted tokens and in weight, so a mean
      # of per-micro-batch means would not be one big batch.
      counts = [int(b["corruption_mask"].sum()) for b in micro]
      weights = [float(b["loss_weights"].sum()) for b in micro]
      self.assertLen(set(counts), k)
      self.assertGreater(max(weights) / min(weights), 1.1)
      if k == 2:
        # Control, same compiled step: the naive scheme is detected.
        _set_params(model, before)
        self.assertTrue(all((v == before[n]).all() for n, v in _params(model).items()))
        trainer.train([_mean_of_micro_batch_means(b) for b in micro])
        naive = _params(model)

    want = updates[1]
    delta = {n: want[n] - before[n] for n in want}
    scale = max(np.abs(d).max() for d in delta.values())
    self.assertGreater(scale, 1e-3)  # The update is not negligible.
    rel = lambda x, y: np.linalg.norm(x - y) / np.linalg.norm(y)
    for k in (2, 4):
      for name in want:
        # Parameters within 1e-6 relative (whole tensor, in norm); the
        # updates themselves, a far stricter check, within 1e-5.
        self.assertLess(rel(updates[k][name], want[name]), 1e-6, name)
        self.assertLess(
            rel(updates[k][name] - before[name], delta[name]), 1e-5, name
        )
        print("REL", k, name, rel(updates[k][name], want[name]), rel(updates[k][name] - before[name], delta[name]))
    deviation = max(np.abs(naive[n] - want[n]).max() for n in want)
    print("DEV", deviation, scale, max(np.abs(updates[2][n] - want[n]).max() for n in want), max(np.abs(updates[4][n] - want[n]).max() for n in want))
    self.assertGreater(deviation, 1e-3 * scale)

  def test_batches_split_for_another_k_are_rejected(self):
    trainer = loss_lib.DiffusionSftTrainer(
        test_common.tiny_qwen3(_VOCAB),
        optax.sgd(0.1),
        peft_trainer.TrainingConfig(eval_every_n_steps=100, max_steps=1),
        config=_config(),
    )
    with self.assertRaisesRegex(
        ValueError, r"split into \[2\].*gradient_accumulation_steps=1"
    ):
      trainer.train(_batches(_config(), k=2))
    with self.assertRaisesRegex(ValueError, "dict batches"):
      trainer._prepare_inputs([1, 2])


if __name__ == "__main__":
  absltest.main()
