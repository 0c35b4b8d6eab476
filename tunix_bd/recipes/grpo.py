# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `grpo`: GRPO / token-level GSPO of a block-diffusion model.

Tunix's `RLCluster` and `GRPOLearner` loop with tunix_bd's rollout, cluster,
learner and registered loss (`tunix_bd.rl`): rollouts are parallel block
denoising, and the live, old and reference policies score each rollout's
own trace. Every input is checked before any compute: the config, the
checkpoints and tokenizer, the stop ids, every prompt, the fingerprint of a
run being resumed.

Outputs under `config.workdir`: `checkpoints/` (orbax, the actor; resume is
automatic and guarded by the run fingerprint), `tensorboard/`,
`metrics.jsonl`, `report.{txt,json,png}` (reward curve; held-out exact
match and tokens per forward before and after) and `export/`.
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import ml_collections

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats
from tunix_bd.models import bd_formats_export
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_source
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd.models import precision as precision_lib
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import meshes as meshes_lib
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import report as report_lib
from tunix_bd.rl import rewards as rewards_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.training import options
from tunix_bd.training import progress

_CHECKPOINT_KEYS = ("checkpoint", "reference", "continued_sft")


def validate(config: ml_collections.ConfigDict) -> settings_lib.GrpoRunSettings:
  """Fails closed on settings that cannot work, before any compute."""
  workdir_lib.check(config.workdir)
  run = settings_lib.from_config(config)
  hf_source.check_dtype(config.export.dtype, "export.dtype")
  bd_formats_export.check_options(config.export)
  precision_lib.from_section(config.model)
  if config.model.random_init:
    config_utils.from_section(
        from_scratch.ScratchModelSettings, config.model.scratch, "model.scratch"
    )
  for key in _CHECKPOINT_KEYS:
    path = config.model.get(key, "")
    if config.model.random_init and key != "continued_sft":
      continue
    if (path or key == "checkpoint") and not os.path.isdir(path):
      hint = (
          " on the embedded default run the quickstart first"
          " (`tunix run --plugin tunix_bd quickstart.py`)"
          if key == "checkpoint"
          else ""
      )
      raise ValueError(
          f"model.{key}={path!r} is not a converted model directory;{hint}."
      )
  if not config.model.random_init and run.grpo.beta:
    _check_reference(config.model)
  return run


# What a reference's log-probs mean: they must be the policy's for the KL.
_REFERENCE_MATCHES = ("block_size", "mask_token_id", "alignment")


def _check_reference(model: ml_collections.ConfigDict) -> None:
  """Fails closed unless the KL reference's log-probs mean the policy's.

  An AR export (no block_diffusion.json), or other block size, mask id or
  alignment, scores a rollout's trace under another distribution: the KL
  would train towards it, silently. Checked before any compute.
  """
  policy = bd_formats.load_settings(model.checkpoint, "model.checkpoint")
  reference = bd_formats.load_settings(model.reference, "model.reference")
  for field in _REFERENCE_MATCHES:
    mine, theirs = getattr(policy, field), getattr(reference, field)
    if mine != theirs:
      raise ValueError(
          f"model.reference={model.reference!r} has {field}={theirs!r}, the"
          f" policy (model.checkpoint) {field}={mine!r}: the KL reference"
          " must score rollouts as the policy does (e.g. set it to"
          " model.checkpoint)."
      )


def _tokenizer_and_bd(config):
  if config.model.random_init:
    tokenizer, bd = mask_token_lib.embedded_tokenizer_and_bd(
        **config.model.scratch_bd.to_dict()
    )
    tokenizer_lib.override_chat_template(tokenizer, config.data.chat_template)
    return tokenizer, bd
  checkpoint = config.model.checkpoint
  return (
      bd_formats.load_tokenizer(
          checkpoint, config.data.chat_template, key="model.checkpoint"
      ),
      bd_formats.load_settings(checkpoint, "model.checkpoint"),
  )


def _models(config, meshes, beta, precision):
  """`(actor, reference or None)`, each on its role's mesh."""
  if config.model.random_init:
    make = lambda mesh: from_scratch.embedded_model(
        config.model.scratch, config.seed, mesh, precision
    )
    return make(meshes.actor), (make(meshes.reference) if beta > 0 else None)
  load = lambda key, mesh: precision_lib.load(
      config.model[key], precision, mesh=mesh
  )
  with mesh_lib.tunix_context(meshes.actor):
    actor, _ = load("checkpoint", meshes.actor)
  reference = None
  if beta > 0:
    with mesh_lib.tunix_context(meshes.reference):
      reference, _ = load("reference", meshes.reference)
    vocab = (actor.config.vocab_size, reference.config.vocab_size)
    if vocab[0] != vocab[1]:
      raise ValueError(
          f"model.reference={config.model.reference!r} has {vocab[1]} token"
          f" ids, the policy {vocab[0]}: the KL needs one vocabulary."
      )
  return actor, reference


def run_fingerprint(config, tokenizer, bd, stop_ids, run) -> dict:
  """Every setting that changes what this run's checkpoints mean.

  See docs/design.md "Fingerprint".
  """
  models = provenance.model_fields(config.model, ("checkpoint", "reference"))
  return fingerprint_lib.fingerprint({
      "recipe": config.recipe,
      **models,
      **precision_lib.from_section(config.model).fingerprint_fields(),
      "tokenizer": fingerprint_lib.tokenizer_digest(tokenizer),
      "pad_id": tokenizer.pad_token_id,
      "bd": bd.to_dict(),
      "rollout": fingerprint_lib.settings_fields(run.rollout),
      "stop_ids": list(stop_ids),
      "trace": "stop-block",
      "grpo": fingerprint_lib.settings_fields(run.grpo),
      "reward": fingerprint_lib.settings_fields(run.reward),
      "data": provenance.data_fields(config.data.to_dict()),
      "train": fingerprint_lib.settings_fields(run.train),
      "batches": fingerprint_lib.settings_fields(run.batches),
      "seed": config.seed,
  })


def _training_config(run, workdir, data_sharding_axes):
  base = options.training_config(run.train, workdir, "GRPO")
  base.data_sharding_axis = data_sharding_axes
  # Tunix's RL config extends its training config with the RL batch sizes
  # and derives gradient accumulation from them.
  fields = {
      f.name: getattr(base, f.name)
      for f in dataclasses.fields(base)
      if f.init and f.name != "gradient_accumulation_steps"
  }
  return compat.RLTrainingConfig(
      **fields,
      actor_optimizer=options.optimizer(run.train),
      mini_batch_size=run.batches.mini_batch_size,
      train_micro_batch_size=run.batches.train_micro_batch_size,
  )


def run(config: ml_collections.ConfigDict) -> dict:
  """Trains, evaluates, exports, reports; returns the report's content."""
  settings = validate(config)
  rollout, grpo = settings.rollout, settings.grpo
  tokenizer, bd = _tokenizer_and_bd(config)
  decode = rollout.denoise_config(tokenizer)
  stop_ids = decode.stop_ids
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=tokenizer.pad_token_id,
      stop_ids=stop_ids,
  )
  reward_fns = rewards_lib.reward_fns(settings.reward)
  # The policy renders prompts as it was trained to (its export's record).
  chat_options = chat.trained_options(
      None
      if config.model.random_init
      else bd_formats.load_extra(config.model.checkpoint, chat.SETTINGS_KEY),
      chat.options_from_data(config.data),
  )
  policy_files = (
      None
      if config.model.random_init
      else hf_source.read(config.model.checkpoint)
  )
  bd_formats_export.check_run(
      config.export,
      bd=bd,
      tokenizer=tokenizer,
      source=policy_files,
      scratch=config.model.scratch,
  )
  train_set, eval_set = prompt_stream.conversations(
      config.data, settings.eval.num_prompts
  )
  max_prompt = rollout.max_prompt_length
  train_prompts = prompt_stream.render(
      tokenizer, train_set, max_prompt, chat_options
  )
  eval_prompts = prompts_lib.encode_prompts(
      tokenizer, eval_set, max_prompt, chat_options
  )
  fingerprint = run_fingerprint(config, tokenizer, bd, stop_ids, settings)
  workdir_lib.check_fingerprint(config.workdir, fingerprint)

  meshes = meshes_lib.build(config.mesh)
  mesh = meshes.actor
  precision = precision_lib.from_section(config.model)
  actor, reference = _models(config, meshes, grpo.beta, precision)
  meshes_lib.check_model_axes(actor, meshes)
  bd.validate_for_model(
      actor.config, pad_id=decode.pad_id, eos_id=None, stop_ids=stop_ids
  )

  evaluate = lambda model: evaluation_lib.evaluate(
      model,
      eval_prompts,
      bd=bd,
      decode=decode,
      settings=settings.eval,
      tokenizer=tokenizer,
  )
  with mesh_lib.tunix_context(mesh):
    before = evaluate(actor)
    cluster = wiring.build_cluster(
        actor=actor,
        reference=reference,
        tokenizer=tokenizer,
        bd=bd,
        stop_ids=stop_ids,
        training_config=_training_config(
            settings, config.workdir, meshes.data_sharding_axes
        ),
        **wiring.rollout_arguments(rollout),
        logits_chunk=precision.chunk,
        role_to_mesh=meshes.role_to_mesh(),
        fingerprint=fingerprint,
    )
    description = f"GRPO ({grpo.loss_algo})"
    cluster.actor_trainer.with_training_hooks(
        progress.ProgressLines(
            description,
            latest=[
                ("rewards", "sum", "reward"),
                ("diffusion", "tokens_per_forward", "tok/fwd"),
            ],
        )
    )
    learner = wiring.build_learner(
        cluster,
        reward_fns=reward_fns,
        **dataclasses.asdict(grpo),
    )
    restored = cluster.actor_trainer.train_steps
    workdir_lib.resumed(
        config.workdir,
        restored,
        recipe="grpo",
        # The actor logs by update step, the rest by (0-based) global step.
        relogged_from=lambda name: (
            restored + 1 if name.startswith("actor/") else cluster.global_steps
        ),
    )
    workdir_lib.record_fingerprint(config.workdir, fingerprint)
    started = time.perf_counter()
    learner.train(
        prompt_stream.items(
            train_prompts,
            batch_size=settings.train.batch_size,
            seed=config.seed,
        )
    )
    train_seconds = time.perf_counter() - started
    policy = cluster.actor_trainer.model
    after = evaluate(policy)
    continued = None
    if config.model.get("continued_sft"):
      other, _ = precision_lib.load(
          config.model.continued_sft, precision, mesh=mesh
      )
      continued = evaluate(other)

  export_dir = os.path.join(config.workdir, "export")
  trained_from = (
      {"random_init": True}
      if config.model.random_init
      else provenance.identify(config.model.checkpoint).provenance()
  )
  bd_export.export_block_diffusion(
      policy,
      tokenizer,
      export_dir,
      bd=bd,
      chat_options=chat_options,
      source=policy_files,
      dtype=config.export.dtype,
      fmt=config.export.format,
      reference_code=config.export.reference_code,
      stop_ids=stop_ids,
      extra={
          "grpo": {"from": trained_from, **dataclasses.asdict(grpo)},
          "precision": precision.provenance(),
      },
  )
  steps = cluster.actor_trainer.train_steps
  caption = (
      f"{steps} steps x {settings.train.batch_size} prompts x"
      f" G={grpo.num_generations}, threshold {rollout.threshold:g},"
      f" T={rollout.temperature:g}, {train_seconds:.0f} s on"
      f" {jax.device_count()} {jax.devices()[0].platform} device(s)"
  )
  content = report_lib.write_report(
      config.workdir,
      before=before,
      after=after,
      continued_sft=continued,
      title=f"{description} on block-diffusion rollouts",
      caption=caption,
      extra={"steps": steps, "train_seconds": train_seconds},
  )
  print(f"policy exported to {export_dir}")
  return content
