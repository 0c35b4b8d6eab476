# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tunix's own diffusion SFT trains a tunix_bd model as tunix_bd's hook does.

On a Tunix with `tunix.sft.diffusion` (main with PR #1891): Tunix's
`diffusion_loss_fn` over `tunix_diffusion.batch_adapter` and `logits_fn`
equals `sft.loss.sft_loss` (dense and chunked head), loss and gradients; a
plain `PeftTrainer` configured by Tunix's `configure_diffusion_sft` makes
the update of one configured with the hook, with and without gradient
accumulation (Tunix divides the summed gradients by the summed weights,
the hook scales each micro-batch by `k / W`); `sft.py` with
`model.sft_loss=tunix` logs the hook's training losses; README.md's
snippet runs. On google-tunix 0.1.7 each of them fails closed instead,
naming the Tunix it needs.
"""

import os
import subprocess
import sys

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import numpy as np
import optax
from tunix_bd import compat
from tunix_bd import config_files
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.recipes import sft
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import tunix_diffusion
from tunix_bd.training import metrics
from tunix_bd_tests import readme
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_NEEDS = "needs tunix.sft.diffusion (Tunix main with PR #1891)"
_HAS = compat.tunix_sft_diffusion is not None
_README_SECTION = "With Tunix's own diffusion API"


def _config(layout: str = bd_config.CLEAN_CONTEXT):
  return bd_config.BlockDiffusionConfig(
      block_size=8, mask_token_id=_MASK, layout=layout
  )


def _micro_batches(config, k: int):
  """The k micro-batches of one global batch of 8 examples (16 rows)."""
  batches = test_common.digit_task_sft_batches(
      _TOKENIZER, config, mix_seed=11, gradient_accumulation_steps=k
  )
  return [batches[i] for i in range(k)]


def _model():
  config = test_common.tiny_qwen3_config(len(_TOKENIZER))
  return test_common.init_qwen3(config, seed=1, scale=0.1)


def _params(model) -> list[np.ndarray]:
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


def _max_abs(xs, ys) -> float:
  return max(float(np.max(np.abs(x - y))) for x, y in zip(xs, ys))


@absltest.skipUnless(_HAS, _NEEDS)
class LossTest(parameterized.TestCase):

  @parameterized.parameters(bd_config.CLEAN_CONTEXT, bd_config.SINGLE_CANVAS)
  def test_loss_and_gradients_equal_the_hooks(self, layout):
    config = _config(layout)
    (batch,) = _micro_batches(config, 1)
    model = _model()
    tunix_batch = tunix_diffusion.batch_adapter(batch)
    scorer = tunix_diffusion.logits_fn(config)

    def tunix_loss(model):
      out = compat.tunix_sft_diffusion.diffusion_loss_fn(
          model, tunix_batch, scorer
      )
      return out.primary_loss.compute()

    got, got_grads = nnx.jit(nnx.value_and_grad(tunix_loss))(model)
    got_grads = jax.tree.leaves(got_grads)
    for logits_chunk in (None, 48):  # Dense, and chunks of 48 of 128.
      hook_loss = lambda m, c=logits_chunk: loss_lib.sft_loss(
          m, batch, config=config, logits_chunk=c
      )[0]
      want, want_grads = nnx.jit(nnx.value_and_grad(hook_loss))(model)
      want_grads = jax.tree.leaves(want_grads)
      with self.subTest(logits_chunk=logits_chunk):
        # Float rounding: measured <= 1.9e-6 on a loss of 4.7 and <= 7.2e-7
        # on gradients of up to 1.75.
        self.assertAlmostEqual(float(got), float(want), delta=1e-5)
        self.assertLess(_max_abs(got_grads, want_grads), 1e-5)
        self.assertGreater(max(np.abs(g).max() for g in want_grads), 0.1)

  def test_weights_are_the_hooks_and_inputs_are_batch_major(self):
    (batch,) = _micro_batches(_config(), 1)
    tunix_batch = tunix_diffusion.batch_adapter(batch)
    self.assertEqual(
        tuple(tunix_batch.model_inputs), tunix_diffusion.MODEL_INPUTS
    )
    np.testing.assert_array_equal(tunix_batch.target_ids, batch.tokens)
    supervised = batch.corruption_mask & (batch.segment_ids != 0)
    np.testing.assert_array_equal(
        tunix_batch.loss_weights, np.where(supervised, batch.loss_weights, 0)
    )
    with self.assertRaisesRegex(ValueError, "needs an SftBatch"):
      tunix_diffusion.batch_adapter({"tokens": batch.tokens})


def _train(configure, k: int):
  """`(losses, update)` of one update of a plain `PeftTrainer` with SGD 1.0.

  The update is `before - after`: the gradient of the global batch.
  """
  model = _model()
  before = _params(model)
  trainer = compat.PeftTrainer(
      model,
      optax.sgd(1.0),
      compat.TrainingConfig(
          eval_every_n_steps=100, max_steps=1, gradient_accumulation_steps=k
      ),
  )
  configure(trainer)
  trainer.train(_micro_batches(_config(), k))
  assert trainer.train_steps == 1
  losses = trainer.metrics_logger.get_metric_history(
      trainer.metrics_prefix, "loss", "train"
  )
  update = [b - a for b, a in zip(before, _params(model))]
  return np.asarray(losses), update


@absltest.skipUnless(_HAS, _NEEDS)
class PeftTrainerTest(absltest.TestCase):

  def test_tunix_configured_trainer_makes_the_hooks_update(self):

    def hook(trainer):
      trainer.with_gen_model_input_fn(loss_lib.sft_model_inputs)
      loss_fn = loss_lib.sft_loss_fn(_config(), logits_chunk=48)
      trainer.with_loss_fn(loss_fn, has_aux=True)

    tunix = lambda t: compat.tunix_sft_diffusion.configure_diffusion_sft(
        t, tunix_diffusion.batch_adapter, tunix_diffusion.logits_fn(_config())
    )
    runs = {
        (name, k): _train(fn, k)
        for name, fn in (("hook", hook), ("tunix", tunix))
        for k in (1, 2)
    }
    want_loss, want = runs["hook", 1]
    self.assertGreater(max(np.abs(u).max() for u in want), 0.1)
    # Unequal micro-batch weights: a mean of micro-batch means would differ.
    weights = [b.loss_weights.sum() for b in _micro_batches(_config(), 2)]
    self.assertGreater(max(weights) / min(weights), 1.1)
    for (name, k), (losses, update) in runs.items():
      with self.subTest(name=name, k=k):
        # One update, logged as the global batch's weighted mean: Tunix's
        # sum / sum of the micro-batches' WeightedMetrics, the hook's mean
        # of `k / W`-scaled sums.
        self.assertLen(losses, 1)
        self.assertAlmostEqual(losses[0], want_loss[0], delta=1e-5)
        self.assertLess(_max_abs(update, want), 1e-5)


def _tiny_sft(workdir: str, checkpoint: str, sft_loss: str):
  config = config_files.get_config("sft", "tiny")
  config.workdir = workdir
  config.model.update(checkpoint=checkpoint, sft_loss=sft_loss)
  config.data.update(num_train=64, num_eval=8)
  config.train.update(
      max_steps=20, eval_every_n_steps=100, checkpoint_every_n_steps=100
  )
  return config


class SftRecipeTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.ar = os.path.join(self.root, "ar")
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=len(_TOKENIZER), seed=2),
        self.ar,
        tokenizer=_TOKENIZER,
    )

  @absltest.skipUnless(_HAS, _NEEDS)
  def test_tunix_adapter_logs_the_hooks_training_losses(self):
    losses = {}
    for sft_loss in ("tunix_bd", "tunix"):
      workdir = os.path.join(self.root, sft_loss)
      sft.run(_tiny_sft(workdir, self.ar, sft_loss))
      records = metrics.read_records(workdir)
      losses[sft_loss] = np.array(
          [r["value"] for r in records if r["name"] == "/train/loss"]
      )
    self.assertLen(losses["tunix"], 20)
    # The hook computes the head in chunks, Tunix densely: float rounding,
    # carried through 20 AdamW steps.
    np.testing.assert_allclose(
        losses["tunix"], losses["tunix_bd"], rtol=1e-5, atol=0
    )
    self.assertLess(losses["tunix"][-1], losses["tunix"][0])

  @absltest.skipIf(_HAS, "the installed Tunix has tunix.sft.diffusion")
  def test_without_tunix_support_fails_before_compute_naming_the_key(self):
    workdir = os.path.join(self.root, "run")
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.sft_loss='tunix' needs Tunix's diffusion SFT adapter .*PR"
        r" #1891.*0\.1\.8\.dev20260822.*; the installed google-tunix \S+ has"
        r" none\.",
    ):
      sft.run(_tiny_sft(workdir, self.ar, "tunix"))
    self.assertFalse(os.path.exists(workdir))
    with self.assertRaisesRegex(ValueError, r"^tunix_diffusion\.configure"):
      tunix_diffusion.configure(None, _config())
    if compat.tunix_diffusion is None:
      (batch,) = _micro_batches(_config(), 1)
      with self.assertRaisesRegex(ValueError, r"^batch_adapter needs"):
        tunix_diffusion.batch_adapter(batch)

  def test_an_unknown_sft_loss_names_the_key(self):
    workdir = os.path.join(self.root, "run")
    with self.assertRaisesRegex(
        ValueError, r"^model\.sft_loss must be one of \['tunix_bd', 'tunix'\]"
    ):
      sft.run(_tiny_sft(workdir, self.ar, "optax"))
    self.assertFalse(os.path.exists(workdir))


class ReadmeTest(absltest.TestCase):

  @absltest.skipUnless(_HAS, _NEEDS)
  def test_readme_snippet_trains_two_steps_as_written(self):
    snippet = readme.python_snippet(_README_SECTION)
    self.assertIn("configure_diffusion_sft", snippet)
    done = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=self.create_tempdir().full_path,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    self.assertEqual(done.stdout.split()[-1], "2", done.stdout)


if __name__ == "__main__":
  absltest.main()
