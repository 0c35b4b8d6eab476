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

import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
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
      settings_lib.GrpoRunSettings.from_sections(stage.sections),
      model.random_init or bool(model.reference),
  )
  if not model.random_init and stage.grpo.beta:
    models.check_kl_reference(model.checkpoint, model.reference)
  return stage


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
  settings = settings_lib.GrpoRunSettings.from_sections(stage.sections)
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
  chat_options, hf_files = stage.check_export("checkpoint", tokenizer, bd)
  train_prompts, eval_prompts = prompt_stream.train_and_eval_prompts(
      tokenizer,
      config.data,
      num_eval=settings.eval.num_prompts,
      max_prompt_length=rollout.max_prompt_length,
      options=chat_options,
  )
  fingerprint = check_fingerprint(stage, tokenizer, bd, stop_ids)

  meshes = meshes_lib.build(config.mesh)
  actor, reference = models.load_policy_and_reference(
      stage.model,
      meshes.actor,
      meshes.reference,
      with_reference=grpo.beta > 0,
      seed=config.seed,
  )
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
  with mesh_lib.tunix_context(meshes.actor):
    before = evaluate(actor)
    cluster, learner = wiring.build_grpo(
        settings,
        actor=actor,
        reference=reference,
        tokenizer=tokenizer,
        bd=bd,
        stop_ids=stop_ids,
        reward_fns=reward_fns,
        meshes=meshes,
        workdir=stage.workdir,
        logits_chunk=stage.model.precision.chunk,
        fingerprint=fingerprint,
    )
    stage.start(
        cluster.actor_trainer.train_steps,
        relogged_from=wiring.relogged_from(cluster),
    )
    batches = prompt_stream.items(
        train_prompts, batch_size=settings.train.batch_size, seed=config.seed
    )
    started = time.perf_counter()
    learner.train(batches)
    train_seconds = time.perf_counter() - started
    policy = cluster.actor_trainer.model
    after = evaluate(policy)
    continued = None  # The same compute spent on SFT, if given.
    if stage.model.continued_sft:
      continued = evaluate(
          models.load_checkpoint(
              stage.model.continued_sft, meshes.actor, stage.model.precision
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
  content = report_lib.write_report(
      stage.workdir,
      before=before,
      after=after,
      continued_sft=continued,
      title=f"{settings.description} on block-diffusion rollouts",
      caption=report_lib.caption(settings, steps, train_seconds),
      extra={"steps": steps, "train_seconds": train_seconds},
  )
  print(f"policy exported to {export_dir}")
  return content
