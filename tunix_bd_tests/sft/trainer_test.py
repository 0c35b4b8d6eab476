# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.trainer: a short real SFT run, and donation.

A tiny Qwen3 trains on the embedded task through Tunix's `PeftTrainer` loop
with gradient accumulation, held-out evaluation and orbax checkpoints; and
as the `sft` recipe builds it (`training.options`), where the step must
consume (donate) the weights and the optimizer state it is given, also right
after a checkpoint, and compute exactly what Tunix's own step computes; a
checkpoint writes its step's train metrics.
"""

import contextlib
import dataclasses
import io
import itertools
import json
import os
import tempfile

from absl.testing import absltest
from flax import nnx
import jax
import numpy as np
import optax
import orbax.checkpoint as ocp
from tunix.sft import peft_trainer
from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import lora as lora_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd.training import metrics
from tunix_bd.training import options
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_EOS = _TOKENIZER.eos_token_id
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_BD = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)
_STEPS = 30


def _data(split: str, num_examples: int) -> dataset_lib.TokenizedDataset:
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse"), min_len=2, max_len=6, seed=0
  )
  conversations = dataset_lib.embedded_conversations(mix, split, num_examples)
  return dataset_lib.tokenize(_TOKENIZER, conversations, 48)


class DiffusionSftTrainerTest(absltest.TestCase):

  def test_sft_run_learns_logs_and_checkpoints(self):
    corruption_config = corruption.SftCorruptionConfig(
        min_noise=0.1, max_noise=1.0
    )
    fingerprint = fingerprint_lib.fingerprint({
        "block_diffusion": _BD.to_dict(),
        "corruption": dataclasses.asdict(corruption_config),
    })
    model_config = test_common.tiny_qwen3_config(len(_TOKENIZER))
    workdir = self.create_tempdir().full_path
    training_config = peft_trainer.TrainingConfig(
        eval_every_n_steps=_STEPS,
        max_steps=_STEPS,
        gradient_accumulation_steps=2,
        checkpoint_root_directory=workdir,
        checkpointing_options=ocp.CheckpointManagerOptions(
            save_interval_steps=_STEPS // 2, max_to_keep=1
        ),
    )
    model = test_common.init_qwen3(model_config, seed=0, scale=0.05)
    trainer = trainer_lib.DiffusionSftTrainer(
        model,
        optax.adam(1e-2),
        training_config,
        config=_BD,
        fingerprint=fingerprint,
    )
    common = dict(corruption=corruption_config, config=_BD, eos_id=_EOS)
    train = batching.sft_batches(
        _data("train", 64),
        batch_size=8,
        seed=0,
        gradient_accumulation_steps=2,
        **common,
    )
    evaluation = batching.sft_batches(
        _data("eval", 16), batch_size=8, **common, **batching.ONE_PASS
    )
    trainer.train(train, evaluation)
    self.assertEqual(trainer.train_steps, _STEPS)

    history = lambda name, mode: trainer.metrics_logger.get_metric_history(
        "", name, mode
    )
    losses = history("loss", "train")
    self.assertLen(losses, _STEPS)
    self.assertLess(losses[-5:].mean(), losses[:5].mean() - 1.0)
    eval_losses = history("loss", "eval")
    self.assertLen(eval_losses, 2)  # Before training and after step 30.
    self.assertLess(eval_losses[1], eval_losses[0] - 1.0)
    # The logged loss (mean of the two micro-batch losses) is the global
    # batch's weighted mean, which the aux ratio computes independently.
    np.testing.assert_allclose(
        history("weighted_loss", "train"), losses, rtol=1e-5
    )
    accuracy = history("masked_accuracy", "train")
    self.assertTrue(((accuracy >= 0) & (accuracy <= 1)).all())
    self.assertGreater(accuracy[-5:].mean(), accuracy[:5].mean())
    # Uniform weights: the total weight is the corrupted-token count.
    np.testing.assert_array_equal(
        history("total_weight", "train"), history("corrupted_tokens", "train")
    )
    self.assertGreater(history("corrupted_tokens", "eval")[0], 16)
    # A bucket is logged at the steps where it has corrupted tokens.
    for name in loss_lib.bucket_names(4):
      bucket_losses = history(name, "train")
      self.assertBetween(len(bucket_losses), _STEPS // 2, _STEPS)
      self.assertTrue(np.isfinite(bucket_losses).all())

    # A new trainer on the same directory resumes the run and its metadata.
    restored = trainer_lib.DiffusionSftTrainer(
        test_common.init_qwen3(model_config, seed=5, scale=0.05),
        optax.adam(1e-2),
        training_config,
        config=_BD,
        fingerprint=fingerprint,
    )
    self.assertEqual(restored.train_steps, _STEPS)
    self.assertEqual(
        restored._restored_custom_metadata[fingerprint_lib.METADATA_KEY],
        fingerprint,
    )
    self.assertEqual(
        restored.custom_checkpoint_metadata(),
        {fingerprint_lib.METADATA_KEY: fingerprint},
    )


class ConstructionTest(absltest.TestCase):

  def test_chunked_logits_refuse_a_lora_head_before_any_step(self):
    model = lora_lib.apply_lora(
        test_common.tiny_qwen3(len(_TOKENIZER)),
        rank=2,
        alpha=2.0,
        module_path=".*lm_head",
    )
    training_config = peft_trainer.TrainingConfig(
        eval_every_n_steps=1, max_steps=1
    )
    with self.assertRaisesRegex(ValueError, "lora.module_path matches"):
      trainer_lib.DiffusionSftTrainer(
          model,
          optax.adam(1e-2),
          training_config,
          config=_BD,
          logits_chunk=4,
      )
    # Unchunked logits apply the adapters: the same model trains.
    trainer_lib.DiffusionSftTrainer(
        model, optax.adam(1e-2), training_config, config=_BD
    )


class ReportConversionTest(absltest.TestCase):

  def test_reads_the_last_losses_and_prints_the_export(self):
    workdir = self.create_tempdir().full_path
    records = [
        {"name": "/train/loss", "step": 1, "value": 3.0},
        {"name": "/train/loss", "step": 2, "value": 2.5},
        {"name": "/eval/loss", "step": 2, "value": 2.75},
    ]
    with open(os.path.join(workdir, metrics.METRICS_FILE), "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in records)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      losses = trainer_lib.report_conversion(workdir, "runs/sft/export", _BD, 2)
    self.assertEqual(losses, {"train_loss": 2.5, "eval_loss": 2.75, "steps": 2})
    self.assertEqual(
        out.getvalue(),
        "sft: exported the block-diffusion model to runs/sft/export"
        f" (block_size=8, mask id {_MASK}, shifted, clean_context); final"
        " train loss 2.5000, eval loss 2.7500.\n",
    )
    # A run stopped at step 3 by its time budget last evaluated at step 2.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      trainer_lib.report_conversion(workdir, "runs/sft/export", _BD, 3)
    self.assertEndsWith(
        out.getvalue(), "train loss 2.5000, eval loss 2.7500 at step 2.\n"
    )
    # A run that logged nothing (no step) reports NaN.
    empty = self.create_tempdir().full_path
    with contextlib.redirect_stdout(io.StringIO()):
      losses = trainer_lib.report_conversion(empty, "runs/sft/export", _BD, 0)
    self.assertTrue(np.isnan(losses["train_loss"]))


_DONATION_STEPS = 2


class _TunixStep(trainer_lib.DiffusionSftTrainer):
  """The same trainer with Tunix's own step (weights not donated)."""

  def donates_model(self) -> bool:
    return False


class _Arrays(compat.TrainingHooks):
  """Records the weight and optimizer arrays each train step is given, and
  the train losses logged by then."""

  def __init__(self):
    self.given = []
    self.logged = []

  def on_train_step_start(self, train_ctx):
    state = nnx.state(train_ctx.optimizer, nnx.optimizer.OptState)
    self.given.append(
        jax.tree.leaves(nnx.state(train_ctx.model, nnx.Param))
        + [x for x in jax.tree.leaves(state) if x.ndim]
    )
    logger, prefix = train_ctx.metrics_logger, train_ctx.metrics_prefix
    self.logged.append(
        len(logger.get_metric_history(prefix, "loss", "train"))
        if logger.metric_exists(prefix, "loss", "train")
        else 0
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
  settings = options.Train(
      batch_size=8,
      max_steps=_DONATION_STEPS,
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
  """A fresh trainer of `trainer_class` after `_DONATION_STEPS` steps on one
  mesh."""
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
    self.assertLen(arrays.given, _DONATION_STEPS)
    # The second step follows a checkpoint: a save that still held views of
    # the arrays would have kept them (no donation, two copies).
    for step, given in enumerate(arrays.given):
      kept = [x.shape for x in given if not x.is_deleted()]
      self.assertEqual(kept, [], f"step {step + 1} kept arrays {kept}")

  def test_a_checkpointed_step_s_metrics_are_written_before_the_next(self):
    # Step 2 starts after step 1's checkpoint: a kill there loses no row.
    self.assertEqual(self.arrays.logged, [0, 1])

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
            options.Train(
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
