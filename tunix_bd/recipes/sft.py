# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `sft`: convert an AR checkpoint into a block-diffusion model.

Masked-diffusion SFT with Tunix's `PeftTrainer` and tunix_bd's loss hook
(`tunix_bd.sft.loss`), or with `model.sft_loss=tunix` Tunix's own diffusion
SFT adapter (`tunix_bd.sft.tunix_diffusion`); docs/design.md, "Corruption
(SFT)". The export keeps the input's layout, config and weight dtype
(`export.dtype` may set another) and adds `block_diffusion.json`, which
generation, OPD and RL read.
"""

from __future__ import annotations

import dataclasses

import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import lora as lora_lib
from tunix_bd.models import sections
from tunix_bd.run import models
from tunix_bd.run import sources
from tunix_bd.run import stage as stage_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd.sft import tunix_diffusion
from tunix_bd.training import options
from tunix_bd.training import progress

DESCRIPTION = "Block-diffusion SFT"


@dataclasses.dataclass(frozen=True)
class SftConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: sections.SftModel
  bd: sections.Bd
  corruption: corruption_lib.SftCorruptionConfig
  data: data_settings.SftData
  train: options.TimedTrain
  lora: lora_lib.LoraSettings
  eval: options.Eval
  export: sections.ExportSettings
  mesh: mesh_lib.MeshSettings


def validate(config: ml_collections.ConfigDict) -> stage_lib.Stage[SftConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  stage = stage_lib.Stage(config, SftConfig)
  if stage.settings.model.sft_loss == sections.TUNIX_SFT_LOSS:
    tunix_diffusion.require(f"model.sft_loss={sections.TUNIX_SFT_LOSS!r}")
  return stage


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Converts, exports and returns the final train and eval losses."""
  stage = validate(config)
  settings = stage.settings
  train, lora = settings.train, settings.lora
  tokenizer = tokenizer_lib.load_tokenizer(
      settings.model.checkpoint,
      settings.data.chat_template,
      key="model.checkpoint",
  )
  # The AR tokenizer gets the mask token (`bd.mask_token`) when converted.
  plan = sources.plan_export(
      stage,
      "checkpoint",
      tokenizer,
      settings.bd,
      chat_options=settings.data.chat_options,
      mask_token=settings.bd.mask_token,
  )
  if plan.source is not None:  # A row's positions must all be the model's.
    hf_checkpoint.check_positions(
        plan.source.config,
        settings.data.max_length,
        0,
        what=f"rows of data.max_length={settings.data.max_length} tokens",
        model_key="model.checkpoint",
        fix="lower data.max_length",
    )
  train_data, eval_data = dataset_lib.tokenized_splits(tokenizer, settings.data)
  fingerprint = stage.check_fingerprint(
      tokenizer=fingerprint_lib.tokenizer_digest(tokenizer)
  )

  mesh = mesh_lib.make_mesh(settings.mesh)
  model, model_config, bd = models.to_block_diffusion(
      models.load(settings.model, "checkpoint", mesh), tokenizer, settings.bd
  )
  model = lora_lib.apply(lora, model, seed=config.seed, mesh=mesh)
  # Every row is validated here, before any training step.
  train_batches, eval_batches = batching.train_and_eval_batches(
      train_data,
      eval_data,
      train=train,
      eval_batch_size=settings.eval.batch_size,
      corruption=settings.corruption,
      config=bd,
      eos_id=tokenizer.eos_token_id,
      seed=config.seed,
      packing=settings.data.packing,
  )
  through_tunix = settings.model.sft_loss == sections.TUNIX_SFT_LOSS
  with stage.restoring():  # The newest checkpoint, one line if bad.
    trainer = trainer_lib.DiffusionSftTrainer(
        model,
        options.optimizer(train),
        options.training_config(train, stage.workdir, DESCRIPTION),
        config=bd,
        fingerprint=fingerprint,
        # Refuses a LoRA'd head; Tunix's loss computes dense logits.
        logits_chunk=None if through_tunix else settings.model.chunk,
        attention=settings.model.attention,
        scan_layers=settings.model.scan_layers,
    )
  if through_tunix:
    tunix_diffusion.configure(trainer, bd)
  trainer.with_training_hooks(progress.ProgressLines(DESCRIPTION))
  stage.start(trainer.train_steps)
  with mesh_lib.tunix_context(mesh):
    trainer.train(train.bounded(train_batches), eval_batches)
  stage.stopped(trainer.train_steps)

  export_dir = plan.write(
      lora_lib.merge(lora, model, model_config),
      tokenizer,
      bd,
      extra={
          "converted_from": stage.provenance("checkpoint"),
          "corruption": dataclasses.asdict(settings.corruption),
          "precision": settings.model.provenance(),
      },
  )
  return trainer_lib.report_conversion(
      stage.workdir, export_dir, bd, trainer.train_steps
  )
