# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `sft`: convert an AR checkpoint into a block-diffusion model.

Masked-diffusion SFT with Tunix's `PeftTrainer` and tunix_bd's loss hook
(`tunix_bd.sft.loss`): the AR weights are reused as they are; the attention
pattern (block-causal), the objective (recover corrupted completion tokens)
and, later, the decoder change. The input is an HF-style directory (the
embedded AR teacher's export, or a user's Qwen3 or Qwen2 with its
tokenizer); the output is the same layout, its config, generation config and
weight dtype kept (`export.dtype` may set another), plus
`block_diffusion.json` (the settings, the mask token and the chat template
switches trained with), which generation, OPD and RL read.

Outputs under `config.workdir`: `checkpoints/` (orbax; resume is automatic and
guarded by the run fingerprint), `tensorboard/`, `metrics.jsonl`, `export/`.
"""

from __future__ import annotations

import os

import jax
import ml_collections

from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import lm_head
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_export
from tunix_bd.models import hf_source
from tunix_bd.models import lora as lora_lib
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd.models import precision as precision_lib
from tunix_bd.run import host_memory
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd.training import metrics
from tunix_bd.training import options
from tunix_bd.training import progress


def validate(
    config: ml_collections.ConfigDict,
) -> tuple[options.TrainSettings, precision_lib.Precision]:
  """Fails closed on settings that cannot work, before any compute.

  Returns:
    The `train` section and the `model` precision keys as settings.
  """
  workdir_lib.check(config.workdir)
  config_utils.check_int("bd.block_size", config.bd.block_size, 1)
  for key, choices in (
      ("alignment", bd_config_lib.ALIGNMENTS),
      ("layout", bd_config_lib.LAYOUTS),
  ):
    if config.bd[key] not in choices:
      raise ValueError(
          f"bd.{key} must be one of {list(choices)}, got {config.bd[key]!r}."
      )
  for key in ("num_train", "num_eval", "max_length"):
    config_utils.check_int(f"data.{key}", config.data[key], 1)
  config_utils.check_int("eval.batch_size", config.eval.batch_size, 1)
  config_utils.check_int("lora.rank", config.lora.rank, 0)
  hf_source.check_dtype(config.export.dtype, "export.dtype")
  chat.options_from_data(config.data)
  train = config_utils.from_section(
      options.TrainSettings, config.train, "train"
  )
  precision = precision_lib.from_section(config.model)
  checkpoint = config.model.checkpoint
  if not os.path.isdir(checkpoint):
    raise ValueError(
        f"model.checkpoint={checkpoint!r} is not a directory. On the embedded "
        "default, train the AR teacher first (`tunix run --plugin tunix_bd "
        "ar_pretrain.py`); otherwise point it at an HF Qwen3 or Qwen2"
        " directory."
    )
  return train, precision


def run_fingerprint(
    config: ml_collections.ConfigDict,
    tokenizer,
    source: provenance.SourceCheckpoint,
    train: options.TrainSettings,
) -> dict[str, object]:
  """Every setting that changes what this run's checkpoints mean.

  The source checkpoint enters by content, so the run resumes wherever the
  AR model is moved to, and refuses another model put in its place; `train`
  by `fingerprint.settings_fields`, as in every recipe.
  """
  return fingerprint_lib.fingerprint({
      "recipe": config.recipe,
      "model.checkpoint": source.fingerprint_field(),
      **precision_lib.from_section(config.model).fingerprint_fields(),
      "tokenizer": fingerprint_lib.tokenizer_digest(tokenizer),
      "bd": config.bd.to_dict(),
      "corruption": config.corruption.to_dict(),
      "data": provenance.data_fields(config.data.to_dict()),
      "lora": config.lora.to_dict() if config.lora.rank else None,
      "train": fingerprint_lib.settings_fields(train),
      "seed": config.seed,
  })


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Converts, exports and returns the final train and eval losses."""
  host_memory.schedule_for_memory()  # Before XLA starts: remat on CPU.
  train, precision = validate(config)
  checkpoint = config.model.checkpoint
  tokenizer = tokenizer_lib.load_tokenizer(
      checkpoint, config.data.chat_template, key="model.checkpoint"
  )
  corruption = corruption_lib.SftCorruptionConfig.from_config_dict(
      config.corruption
  )
  train_data, eval_data = dataset_lib.tokenized_splits(tokenizer, config.data)
  workdir = config.workdir
  source = provenance.identify(checkpoint)
  fingerprint = run_fingerprint(config, tokenizer, source, train)
  workdir_lib.check_fingerprint(workdir, fingerprint)

  mesh = mesh_lib.from_section(config.mesh)
  if jax.default_backend() == "cpu":
    # Every step's activations are host buffers: return them when freed.
    host_memory.return_freed_buffers()
  hf_files = hf_source.read(checkpoint)
  with mesh_lib.tunix_context(mesh):
    model, _ = precision_lib.load(checkpoint, precision, mesh=mesh)
  eos_id = tokenizer.eos_token_id
  model, model_config, mask_id = mask_token_lib.provision_mask_token(
      model, tokenizer, config.bd.mask_token, stop_ids=(eos_id,)
  )
  bd = bd_config_lib.BlockDiffusionConfig(
      block_size=config.bd.block_size,
      mask_token_id=mask_id,
      alignment=config.bd.alignment,
      layout=config.bd.layout,
  )
  bd.validate_for_model(
      model_config, pad_id=tokenizer.pad_token_id, eos_id=eos_id
  )
  if config.lora.rank:
    with mesh_lib.tunix_context(mesh):
      model = lora_lib.apply_lora(
          model,
          rank=config.lora.rank,
          alpha=config.lora.alpha,
          module_path=config.lora.module_path,
          seed=config.seed,
          mesh=mesh,
      )
  if precision.chunk:
    lm_head.model_head(model, mask_id)  # Fails closed on a LoRA'd head.
  # Batches are built (and every row validated) before any training step.
  train_batches = batching.sft_batches(
      train_data,
      batch_size=train.batch_size,
      corruption=corruption,
      config=bd,
      eos_id=eos_id,
      seed=config.seed,
      gradient_accumulation_steps=train.gradient_accumulation_steps,
      section="train",
  )
  eval_batches = batching.eval_batches(
      eval_data,
      batch_size=config.eval.batch_size,
      corruption=corruption,
      config=bd,
      eos_id=eos_id,
      section="eval",
  )
  trainer = trainer_lib.DiffusionSftTrainer(
      model,
      options.optimizer(train),
      options.training_config(train, workdir, "Block-diffusion SFT"),
      config=bd,
      fingerprint=fingerprint,
      logits_chunk=precision.chunk,
  )
  trainer.with_training_hooks(progress.ProgressLines("Block-diffusion SFT"))
  workdir_lib.resumed(workdir, trainer.train_steps, recipe="sft")
  workdir_lib.record_fingerprint(workdir, fingerprint)
  with mesh_lib.tunix_context(mesh):
    trainer.train(train_batches, eval_batches)

  export_dir = os.path.join(workdir, "export")
  if config.lora.rank:
    model = lora_lib.merge_lora(model, model_config, alpha=config.lora.alpha)
  bd_export.export_block_diffusion(
      model,
      tokenizer,
      export_dir,
      bd=bd,
      chat_options=chat.options_from_data(config.data),
      source=hf_files,
      dtype=config.export.dtype,
      extra={
          "converted_from": source.provenance(),
          "corruption": corruption.to_dict(),
          "precision": precision.provenance(),
      },
  )
  losses = {
      "train_loss": metrics.last_metric(workdir, "/train/loss"),
      "eval_loss": metrics.last_metric(workdir, "/eval/loss"),
  }
  print(
      f"sft: exported the block-diffusion model to {export_dir} "
      f"(block_size={bd.block_size}, mask id {bd.mask_token_id}, "
      f"{bd.alignment}, {bd.layout}); final train loss "
      f"{losses['train_loss']:.4f}, eval loss {losses['eval_loss']:.4f}."
  )
  return losses
