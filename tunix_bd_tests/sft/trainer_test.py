# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.trainer.DiffusionSftTrainer: a short real SFT run.

A tiny Qwen3 trains on the embedded task through Tunix's `PeftTrainer` loop
with gradient accumulation, held-out evaluation and orbax checkpoints.
"""

import contextlib
import dataclasses
import io
import json
import os

from absl.testing import absltest
import numpy as np
import optax
import orbax.checkpoint as ocp
from tunix.sft import peft_trainer
from tunix_bd import fingerprint as fingerprint_lib
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
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_EOS = _TOKENIZER.eos_token_id
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_STEPS = 30


def _data(split: str, num_examples: int) -> dataset_lib.TokenizedDataset:
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse"), min_len=2, max_len=6, seed=0
  )
  conversations = dataset_lib.embedded_conversations(mix, split, num_examples)
  return dataset_lib.tokenize(_TOKENIZER, conversations, 48)


class DiffusionSftTrainerTest(absltest.TestCase):

  def test_sft_run_learns_logs_and_checkpoints(self):
    config = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)
    corruption_config = corruption.SftCorruptionConfig(
        min_noise=0.1, max_noise=1.0
    )
    fingerprint = fingerprint_lib.fingerprint({
        "block_diffusion": config.to_dict(),
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
        config=config,
        fingerprint=fingerprint,
    )
    common = dict(corruption=corruption_config, config=config, eos_id=_EOS)
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
        config=config,
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
    config = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)
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
          config=config,
          logits_chunk=4,
      )
    # Unchunked logits apply the adapters: the same model trains.
    trainer_lib.DiffusionSftTrainer(
        model, optax.adam(1e-2), training_config, config=config
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
    config = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      losses = trainer_lib.report_conversion(
          workdir, "runs/sft/export", config, 2
      )
    self.assertEqual(losses, {"train_loss": 2.5, "eval_loss": 2.75, "steps": 2})
    self.assertEqual(
        out.getvalue(),
        "sft: exported the block-diffusion model to runs/sft/export"
        f" (block_size=8, mask id {_MASK}, shifted, clean_context); final"
        " train loss 2.5000, eval loss 2.7500.\n",
    )
    # A run that logged nothing (no step) reports NaN.
    empty = self.create_tempdir().full_path
    with contextlib.redirect_stdout(io.StringIO()):
      losses = trainer_lib.report_conversion(
          empty, "runs/sft/export", config, 0
      )
    self.assertTrue(np.isnan(losses["train_loss"]))


if __name__ == "__main__":
  absltest.main()
