# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `ar_pretrain`: train the embedded AR teacher with Tunix.

A tiny `tunix.models.qwen3.Qwen3` learns the embedded digit tasks (or a
user's chat JSONL) with Tunix's `PeftTrainer` and its stock next-token loss.
The run checkpoints with orbax and resumes from `workdir/checkpoints`, logs to
TensorBoard and `workdir/metrics.jsonl`, exports an HF-style directory
(`workdir/export`: `config.json`, `model.safetensors`, tokenizer files) that
later stages load exactly like a user's checkpoint, and ends with greedy
exact-match accuracy per task from Tunix's AR `Sampler`.

Outputs under `config.workdir`:
  checkpoints/  orbax checkpoints (resume happens automatically)
  tensorboard/  TensorBoard event files
  metrics.jsonl every logged scalar, one JSON object per line
  export/       the HF-style model + tokenizer directory
  eval.json     exact-match accuracy per task and the predictions
"""

from __future__ import annotations

import os

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections

from tunix_bd.core import masks
from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import sources
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.recipes import ar_eval
from tunix_bd.recipes import common


def ar_model_inputs(batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """Maps a right-padded batch to the inputs of Tunix's default AR loss.

  Args:
    batch: `{"tokens", "completion_mask", "valid_mask"}`, each
      `[batch, length]`.

  Returns:
    `input_tokens`, `input_mask` (the completion: Tunix's loss supervises
    `input_mask[:, 1:]`), `positions` and a causal `attention_mask`
    `[batch, length, length]` that keeps pads out.
  """
  tokens = batch["tokens"]
  positions = jnp.broadcast_to(
      jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape
  )
  segment_ids = batch["valid_mask"].astype(jnp.int32)
  # A block size of 1 is exactly the causal mask.
  mask = masks.block_causal_mask(
      positions,
      positions,
      1,
      q_segment_ids=segment_ids,
      kv_segment_ids=segment_ids,
  )
  return {
      "input_tokens": tokens,
      "input_mask": batch["completion_mask"],
      "positions": positions,
      "attention_mask": mask,
  }


def validate(config: ml_collections.ConfigDict) -> None:
  """Fails closed on settings that cannot work, before any compute."""
  common.require_positive(
      config,
      "model.num_layers",
      "model.embed_dim",
      "model.hidden_dim",
      "model.num_heads",
      "model.head_dim",
      "model.num_kv_heads",
      "data.num_train",
      "data.num_eval",
      "data.max_length",
      "train.batch_size",
      "train.max_steps",
      "train.eval_every_n_steps",
      "train.checkpoint_every_n_steps",
      "train.checkpoints_to_keep",
      "eval.max_new_tokens",
      "eval.batch_size",
  )
  if config.model.num_heads % config.model.num_kv_heads:
    raise ValueError(
        f"model.num_heads={config.model.num_heads} must be a multiple of "
        f"model.num_kv_heads={config.model.num_kv_heads}."
    )
  if config.train.learning_rate <= 0:
    raise ValueError(
        f"train.learning_rate must be > 0, got {config.train.learning_rate}."
    )
  if not config.workdir:
    raise ValueError("workdir must be set.")


def _fingerprint(config: ml_collections.ConfigDict, tokenizer) -> dict:
  return fingerprint_lib.fingerprint({
      "recipe": config.recipe,
      "model": config.model.to_dict(),
      "data": sources.data_fields(config.data.to_dict()),
      "tokenizer": fingerprint_lib.tokenizer_digest(tokenizer),
      "train.batch_size": config.train.batch_size,
      "seed": config.seed,
  })


class _Trainer(compat.PeftTrainer):
  """PeftTrainer whose checkpoints carry the run's fingerprint."""

  fingerprint: dict = {}

  def custom_checkpoint_metadata(self):
    return {fingerprint_lib.METADATA_KEY: self.fingerprint}


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Trains, exports and evaluates; returns exact match per task."""
  validate(config)
  tokenizer = tokenizer_lib.build_char_tokenizer()
  train_data, eval_data = dataset_lib.tokenized_splits(tokenizer, config.data)
  workdir = config.workdir
  fingerprint = _fingerprint(config, tokenizer)
  checkpoint_dir = os.path.join(workdir, "checkpoints")
  fingerprint_lib.check_or_record(checkpoint_dir, fingerprint)
  logging.info(
      "ar_pretrain: %d train / %d eval examples of <= %d tokens.",
      len(train_data),
      len(eval_data),
      config.data.max_length,
  )

  mesh = common.make_mesh(config.mesh)
  model_config = common.qwen3_config(config.model, len(tokenizer))
  model = common.init_model(model_config, config.seed, mesh)
  trainer = _Trainer(
      model,
      common.optimizer(config.train),
      common.training_config(config.train, workdir, "AR pretraining"),
  )
  trainer.fingerprint = fingerprint
  trainer.with_gen_model_input_fn(ar_model_inputs)
  train_batches = dataset_lib.batches(
      train_data, config.train.batch_size, seed=config.seed
  )
  eval_batches = dataset_lib.batches(
      eval_data, config.eval.batch_size, seed=0, num_epochs=1, shuffle=False
  )
  with mesh:
    # MapDatasets, not iterators: Tunix re-iterates eval data at each eval.
    trainer.train(train_batches, eval_batches)

  export_dir = os.path.join(workdir, "export")
  common.export_qwen3(model, tokenizer, export_dir)
  logging.info("ar_pretrain: exported the model to %s", export_dir)

  with mesh:
    scores, predictions = ar_eval.exact_match(
        model,
        tokenizer,
        eval_data.conversations,
        max_new_tokens=config.eval.max_new_tokens,
        batch_size=config.eval.batch_size,
    )
  common.write_json(
      os.path.join(workdir, "eval.json"),
      {
          "exact_match": scores,
          "predictions": [
              {
                  "prompt": c.messages[-2]["content"],
                  "answer": c.answer,
                  "prediction": p,
                  "task": c.task,
              }
              for c, p in zip(eval_data.conversations, predictions)
          ],
      },
  )
  print(
      common.log_summary(
          f"AR teacher greedy exact match on {len(eval_data.conversations)}"
          " eval examples (Tunix Sampler):",
          scores,
      )
  )
  return scores
