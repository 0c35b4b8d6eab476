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
import ml_collections

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.benchmarking import ar_sampler
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import report
from tunix_bd.models import export
from tunix_bd.models import from_scratch
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.training import ar
from tunix_bd.training import options
from tunix_bd.training import progress


def validate(
    config: ml_collections.ConfigDict,
) -> tuple[from_scratch.ScratchModelSettings, options.TrainSettings]:
  """Fails closed on settings that cannot work, before any compute.

  Returns:
    The `model` and `train` sections as settings.
  """
  workdir_lib.check(config.workdir)
  for key in ("num_train", "num_eval", "max_length"):
    config_utils.check_int(f"data.{key}", config.data[key], 1)
  for key in ("max_new_tokens", "batch_size"):
    config_utils.check_int(f"eval.{key}", config.eval[key], 1)
  model = config_utils.from_section(
      from_scratch.ScratchModelSettings, config.model, "model"
  )
  return model, config_utils.from_section(
      options.TrainSettings, config.train, "train"
  )


def _fingerprint(
    config: ml_collections.ConfigDict, tokenizer, train: options.TrainSettings
) -> dict:
  return fingerprint_lib.fingerprint({
      "recipe": config.recipe,
      "model": config.model.to_dict(),
      "data": provenance.data_fields(config.data.to_dict()),
      "tokenizer": fingerprint_lib.tokenizer_digest(tokenizer),
      "train": fingerprint_lib.settings_fields(train),
      "seed": config.seed,
  })


class _Trainer(compat.PeftTrainer):
  """PeftTrainer whose checkpoints carry the run's fingerprint."""

  fingerprint: dict = {}

  def custom_checkpoint_metadata(self):
    return {fingerprint_lib.METADATA_KEY: self.fingerprint}


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Trains, exports and evaluates; returns exact match per task."""
  model_settings, train = validate(config)
  tokenizer = tokenizer_lib.override_chat_template(
      tokenizer_lib.build_char_tokenizer(), config.data.chat_template
  )
  train_data, eval_data = dataset_lib.tokenized_splits(tokenizer, config.data)
  workdir = config.workdir
  fingerprint = _fingerprint(config, tokenizer, train)
  workdir_lib.check_fingerprint(workdir, fingerprint)
  logging.info(
      "ar_pretrain: %d train / %d eval examples of <= %d tokens.",
      len(train_data),
      len(eval_data),
      config.data.max_length,
  )

  mesh = mesh_lib.from_section(config.mesh)
  model_config = from_scratch.qwen3_config(model_settings, len(tokenizer))
  model = from_scratch.init_model(model_config, config.seed, mesh)
  trainer = _Trainer(
      model,
      options.optimizer(train),
      options.training_config(train, workdir, "AR pretraining"),
  )
  trainer.fingerprint = fingerprint
  trainer.with_training_hooks(progress.ProgressLines("AR pretraining"))
  trainer.with_gen_model_input_fn(ar.ar_model_inputs)
  train_batches = dataset_lib.batches(
      train_data, train.batch_size, seed=config.seed, key="train.batch_size"
  )
  eval_batches = dataset_lib.batches(
      eval_data,
      config.eval.batch_size,
      seed=0,
      num_epochs=1,
      shuffle=False,
      key="eval.batch_size",
  )
  workdir_lib.resumed(workdir, trainer.train_steps, recipe="ar_pretrain")
  workdir_lib.record_fingerprint(workdir, fingerprint)
  with mesh_lib.tunix_context(mesh):
    # MapDatasets, not iterators: Tunix re-iterates eval data at each eval.
    trainer.train(train_batches, eval_batches)

  export_dir = os.path.join(workdir, "export")
  export.export_qwen3(model, tokenizer, export_dir)
  logging.info("ar_pretrain: exported the model to %s", export_dir)

  print(
      f"ar_pretrain: greedy decoding of {len(eval_data.conversations)} eval"
      " prompts with Tunix's Sampler",
      flush=True,
  )
  with mesh_lib.tunix_context(mesh):
    scores, predictions = ar_sampler.exact_match(
        model,
        tokenizer,
        eval_data.conversations,
        max_new_tokens=config.eval.max_new_tokens,
        batch_size=config.eval.batch_size,
        options=chat.options_from_data(config.data),
    )
  report.write_json(
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
      report.percent_table(
          f"AR teacher greedy exact match on {len(eval_data.conversations)}"
          " eval examples (Tunix Sampler):",
          scores,
      )
  )
  return scores
