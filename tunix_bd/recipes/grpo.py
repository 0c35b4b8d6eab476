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
import time

import jax
import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.models import bd_formats_export
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import meshes as meshes_lib
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import report as report_lib
from tunix_bd.rl import rewards as rewards_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring
from tunix_bd.run import models
from tunix_bd.run import sections
from tunix_bd.run import stage as stage_lib
from tunix_bd.training import options
from tunix_bd.training import progress


def validate(config: ml_collections.ConfigDict) -> stage_lib.Stage:
  """Fails closed on settings that cannot work, before any compute."""
  stage = stage_lib.Stage(
      config,
      model=sections.GrpoModelSettings,
      data=settings_lib.DataSettings,
      rollout=settings_lib.RolloutSettings,
      grpo=settings_lib.GrpoSettings,
      reward=settings_lib.RewardSettings,
      train=(options.TrainSettings, settings_lib.RlBatchSettings),
      eval=settings_lib.EvalSettings,
      export=sections.ExportSettings,
  )
  model = stage.model
  settings_lib.check_together(
      run_settings(stage), model.random_init or bool(model.reference)
  )
  if not model.random_init and stage.grpo.beta:
    models.check_kl_reference(model.checkpoint, model.reference)
  return stage


def run_settings(stage: stage_lib.Stage) -> settings_lib.GrpoRunSettings:
  """The RL sections as `tunix_bd.rl` takes them."""
  train, batches = stage.train
  return settings_lib.GrpoRunSettings(
      rollout=stage.rollout,
      grpo=stage.grpo,
      reward=stage.reward,
      train=train,
      batches=batches,
      eval=stage.eval,
  )


def _models(stage, meshes, seed: int):
  """`(actor, reference or None)`, each on its role's mesh."""
  actor = models.load(stage.model, "checkpoint", meshes.actor, seed=seed)
  if stage.grpo.beta <= 0:
    return actor, None
  reference = models.load(stage.model, "reference", meshes.reference, seed=seed)
  vocab = (actor.config.vocab_size, reference.config.vocab_size)
  if vocab[0] != vocab[1]:
    raise ValueError(
        f"model.reference={stage.model.reference!r} has {vocab[1]} token"
        f" ids, the policy {vocab[0]}: the KL needs one vocabulary."
    )
  return actor, reference


def check_fingerprint(stage, tokenizer, bd, stop_ids) -> dict:
  """The run fingerprint by the one rule, plus what the sources give."""
  return stage.check_fingerprint(
      tokenizer=fingerprint_lib.tokenizer_digest(tokenizer),
      pad_id=tokenizer.pad_token_id,
      bd=bd.to_dict(),
      stop_ids=list(stop_ids),
      trace="stop-block",
  )


def run(config: ml_collections.ConfigDict) -> dict:
  """Trains, evaluates, exports, reports; returns the report's content."""
  stage = validate(config)
  settings = run_settings(stage)
  rollout, grpo = settings.rollout, settings.grpo
  tokenizer, bd = models.converted_tokenizer_and_bd(
      stage.model, "checkpoint", stage.data.chat_template
  )
  decode = rollout.denoise_config(tokenizer)
  stop_ids = decode.stop_ids
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=tokenizer.pad_token_id,
      stop_ids=stop_ids,
  )
  reward_fns = rewards_lib.reward_fns(settings.reward)
  # The policy renders prompts as it was trained to (its export's record).
  chat_options = models.trained_chat_options(
      stage.model, "checkpoint", stage.data.chat_options
  )
  hf_files = models.hf_files(stage.model, "checkpoint")  # The export keeps.
  bd_formats_export.check_run(
      stage.export,
      bd=bd,
      tokenizer=tokenizer,
      source=hf_files,
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
  fingerprint = check_fingerprint(stage, tokenizer, bd, stop_ids)

  meshes = meshes_lib.build(config.mesh)
  mesh = meshes.actor
  actor, reference = _models(stage, meshes, config.seed)
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
        training_config=wiring.training_config(
            settings, stage.workdir, meshes.data_sharding_axes
        ),
        **wiring.rollout_arguments(rollout),
        logits_chunk=stage.model.precision.chunk,
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
    stage.start(
        restored,
        # The actor logs by update step, the rest by (0-based) global step.
        relogged_from=lambda name: (
            restored + 1 if name.startswith("actor/") else cluster.global_steps
        ),
    )
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
    if stage.model.continued_sft:
      continued = evaluate(
          models.load(
              stage.model, "continued_sft", mesh, path=stage.model.continued_sft
          )
      )

  export_dir = stage.export_block_diffusion(
      policy,
      tokenizer,
      bd=bd,
      chat_options=chat_options,
      source=hf_files,
      stop_ids=stop_ids,
      extra={
          "grpo": {
              "from": stage.provenance("checkpoint"),
              **dataclasses.asdict(grpo),
          },
          "precision": stage.model.precision.provenance(),
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
      stage.workdir,
      before=before,
      after=after,
      continued_sft=continued,
      title=f"{description} on block-diffusion rollouts",
      caption=caption,
      extra={"steps": steps, "train_seconds": train_seconds},
  )
  print(f"policy exported to {export_dir}")
  return content
