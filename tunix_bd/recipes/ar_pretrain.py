# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `ar_pretrain`: train the embedded AR teacher with Tunix.

A tiny `tunix.models.qwen3.Qwen3` learns the embedded digit tasks (or a
user's chat JSONL) with Tunix's `PeftTrainer` and its stock next-token loss,
exports `workdir/export` (read later like a user's checkpoint) and writes
greedy exact match per task from Tunix's `Sampler` to `eval.json`.
"""

from __future__ import annotations

import dataclasses
import os

from absl import logging
import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.evaluation import ar_sampler
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.models import from_scratch
from tunix_bd.run import stage as stage_lib
from tunix_bd.training import ar
from tunix_bd.training import options
from tunix_bd.training import progress

DESCRIPTION = "AR pretraining"


@dataclasses.dataclass(frozen=True)
class ArPretrainConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: from_scratch.ArModelSettings
  data: data_settings.Data
  train: options.Train
  eval: options.ArEval
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[ArPretrainConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  return stage_lib.Stage(config, ArPretrainConfig)


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Trains, exports and evaluates; returns exact match per task."""
  stage = validate(config)
  settings = stage.settings
  train = settings.train
  tokenizer = tokenizer_lib.override_chat_template(
      tokenizer_lib.build_char_tokenizer(), settings.data.chat_template
  )
  train_data, eval_data = dataset_lib.tokenized_splits(tokenizer, settings.data)
  fingerprint = stage.check_fingerprint(
      tokenizer=fingerprint_lib.tokenizer_digest(tokenizer)
  )
  logging.info(
      "ar_pretrain: %d train / %d eval examples of <= %d tokens.",
      len(train_data),
      len(eval_data),
      settings.data.max_length,
  )

  mesh = mesh_lib.make_mesh(settings.mesh)
  model_config = settings.model.model_config(
      from_scratch.qwen3_config(settings.model, len(tokenizer))
  )
  model = from_scratch.init_model(model_config, config.seed, mesh)
  with stage.restoring():  # The newest checkpoint, one line if bad.
    trainer = ar.FingerprintedTrainer(
        model,
        options.optimizer(train),
        options.training_config(train, stage.workdir, DESCRIPTION),
        fingerprint=fingerprint,
    )
  trainer.with_training_hooks(progress.ProgressLines(DESCRIPTION))
  trainer.with_gen_model_input_fn(ar.ar_model_inputs)
  train_batches = dataset_lib.batches(
      train_data, train.batch_size, seed=config.seed, key="train.batch_size"
  )
  # A MapDataset, not an iterator: Tunix re-iterates it at each evaluation.
  eval_batches = dataset_lib.batches(
      eval_data,
      settings.eval.batch_size,
      seed=0,
      num_epochs=1,
      shuffle=False,
      key="eval.batch_size",
  )
  stage.start(trainer.train_steps)
  with mesh_lib.tunix_context(mesh):
    trainer.train(train_batches, eval_batches)

  export.export_checkpoint(model, tokenizer, stage.export_dir)
  logging.info("ar_pretrain: exported the model to %s", stage.export_dir)
  conversations = eval_data.conversations
  print(
      f"ar_pretrain: greedy decoding of {len(conversations)} eval"
      " prompts with Tunix's Sampler",
      flush=True,
  )
  with mesh_lib.tunix_context(mesh):
    return ar_sampler.write_exact_match(
        model,
        tokenizer,
        conversations,
        path=os.path.join(stage.workdir, "eval.json"),
        max_new_tokens=settings.eval.max_new_tokens,
        batch_size=settings.eval.batch_size,
        options=settings.data.chat_options,
    )
