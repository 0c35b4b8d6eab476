# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `sft.trainer.DonatingStepMixin` through `DiffusionSftTrainer`.

A tiny Qwen3 trains through Tunix's `PeftTrainer` loop as the `sft` recipe
builds it (`training.options`): the step must consume (donate) the weights
and the optimizer state it is given, also right after a checkpoint, and
compute exactly what Tunix's own step computes.
"""

import itertools
import tempfile

from absl.testing import absltest
from flax import nnx
import jax
import numpy as np
from tunix_bd import compat
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import lora as lora_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd.training import options
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_BD = bd_config.BlockDiffusionConfig(
    block_size=8,
    mask_token_id=_TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN),
)
_STEPS = 2


class _TunixStep(trainer_lib.DiffusionSftTrainer):
  """The same trainer with Tunix's own step (weights not donated)."""

  def donates_model(self) -> bool:
    return False


class _Arrays(compat.TrainingHooks):
  """Records the weight and optimizer arrays each train step is given."""

  def __init__(self):
    self.given = []

  def on_train_step_start(self, train_ctx):
    state = nnx.state(train_ctx.optimizer, nnx.optimizer.OptState)
    self.given.append(
        jax.tree.leaves(nnx.state(train_ctx.model, nnx.Param))
        + [x for x in jax.tree.leaves(state) if x.ndim]
    )

  def on_train_start(self, train_ctx):
    pass

  def on_train_end(self, train_ctx):
    pass

  def on_train_step_end(self, train_ctx, *unused_step_and_loss):
    pass

  def on_eval_step_start(self, train_ctx):
    pass

  def on_eval_step_end(self, train_ctx, eval_loss):
    pass


def _trainer(workdir: str, trainer_class=trainer_lib.DiffusionSftTrainer):
  settings = options.TrainSettings(
      batch_size=8,
      max_steps=_STEPS,
      learning_rate=1e-2,
      warmup_steps=0,
      weight_decay=0.01,
      max_grad_norm=1.0,
      eval_every_n_steps=1,
      checkpoint_every_n_steps=1,  # A checkpoint before every next step.
      checkpoints_to_keep=1,
      gradient_accumulation_steps=1,
  )
  model = test_common.init_qwen3(
      test_common.tiny_qwen3_config(len(_TOKENIZER)), seed=0, scale=0.05
  )
  return trainer_class(
      model,
      options.optimizer(settings),
      options.training_config(settings, workdir, "SFT"),
      config=_BD,
      logits_chunk=16,
  )


def _batches():
  return test_common.digit_task_sft_batches(
      _TOKENIZER, _BD, mix_seed=0, gradient_accumulation_steps=1
  )


def _train(trainer_class, hooks=None):
  """A fresh trainer of `trainer_class` after `_STEPS` steps on one mesh."""
  workdir = tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir())
  trainer = _trainer(workdir, trainer_class)
  if hooks is not None:
    trainer.with_training_hooks(hooks)
  mesh = mesh_lib.from_section({"fsdp": -1, "tp": 1})
  with mesh_lib.tunix_context(mesh):
    trainer.train(_batches(), list(itertools.islice(_batches(), 1)))
  return trainer


class DonatingStepTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # One donating run: what each step was given, and what it computed.
    cls.arrays = _Arrays()
    cls.donating = _train(trainer_lib.DiffusionSftTrainer, cls.arrays)

  def test_each_step_consumes_the_weights_and_optimizer_state(self):
    self.assertTrue(self.donating.donates_model())
    arrays = self.arrays
    self.assertLen(arrays.given, _STEPS)
    # The second step follows a checkpoint: a save that still held views of
    # the arrays would have kept them (no donation, two copies).
    for step, given in enumerate(arrays.given):
      kept = [x.shape for x in given if not x.is_deleted()]
      self.assertEqual(kept, [], f"step {step + 1} kept arrays {kept}")

  def test_evaluating_copies_no_weight(self):
    trainer = _trainer(self.create_tempdir().full_path)
    _, eval_step = trainer.jit_train_and_eval_step(cache_nnx_graph=True)
    weights = jax.tree.leaves(nnx.state(trainer.model, nnx.Param))
    before = [x.unsafe_buffer_pointer() for x in weights]
    batch = next(iter(_batches()))
    eval_step(jax.tree.map(jax.numpy.asarray, batch))
    weights = jax.tree.leaves(nnx.state(trainer.model, nnx.Param))
    self.assertEqual([x.unsafe_buffer_pointer() for x in weights], before)

  def test_donating_computes_what_tunix_step_computes(self):
    tunix = _train(_TunixStep)
    self.assertFalse(tunix.donates_model())
    jax.tree.map(
        np.testing.assert_array_equal,
        *(
            nnx.state(trainer.model, nnx.Param).to_pure_dict()
            for trainer in (self.donating, tunix)
        ),
    )

  def test_placing_the_optimizer_state_copies_nothing(self):
    trainer = _trainer(self.create_tempdir().full_path)
    mesh = mesh_lib.from_section({"fsdp": -1, "tp": 1})
    state = nnx.state(trainer.optimizer, nnx.optimizer.OptState)
    before = [x.unsafe_buffer_pointer() for x in jax.tree.leaves(state)]
    with mesh_lib.tunix_context(mesh):
      trainer.jit_train_and_eval_step()
    state = nnx.state(trainer.optimizer, nnx.optimizer.OptState)
    after = [x.unsafe_buffer_pointer() for x in jax.tree.leaves(state)]
    self.assertEqual(after, before)
    shardings = nnx.get_named_sharding(state, mesh)
    for x, sharding in zip(jax.tree.leaves(state), jax.tree.leaves(shardings)):
      self.assertEqual(x.sharding, sharding)

  def test_lora_keeps_tunix_step(self):
    trainer = _trainer(self.create_tempdir().full_path)
    model = lora_lib.apply_lora(trainer.model, rank=2, alpha=4.0)
    lora = trainer_lib.DiffusionSftTrainer(
        model,
        options.optimizer(
            options.TrainSettings(
                batch_size=8,
                max_steps=1,
                learning_rate=1e-2,
                warmup_steps=0,
                weight_decay=0.0,
                max_grad_norm=1.0,
                eval_every_n_steps=1,
                checkpoint_every_n_steps=1,
                checkpoints_to_keep=1,
            )
        ),
        compat.TrainingConfig(eval_every_n_steps=1, max_steps=1),
        config=_BD,
    )
    self.assertFalse(lora.donates_model())


if __name__ == "__main__":
  absltest.main()
