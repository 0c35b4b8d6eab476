# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `grpo`: GRPO / token-level GSPO of a block-diffusion model.

Tunix's `RLCluster` and `GRPOLearner` with tunix_bd's rollout, cluster,
learner and loss (`tunix_bd.rl`; `grpo.learner=tunix` trains with Tunix's own
learner and loss instead: `rl.settings.GrpoSettings.learner`). Semantics:
docs/design.md, "RL policies on one trace"; runs: docs/recipes.md, "Runs:
logs, checkpoints, resume". Also writes `report.{txt,json,png}` and `export/`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Iterable

import ml_collections

from tunix_bd import mesh as mesh_lib
from tunix_bd.rl import evaluation
from tunix_bd.rl import learner as learner_lib
from tunix_bd.rl import meshes as meshes_lib
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import report
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring
from tunix_bd.run import models
from tunix_bd.run import sources as sources_lib
from tunix_bd.run import stage as stage_lib


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[settings_lib.GrpoConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  stage = stage_lib.Stage(config, settings_lib.GrpoConfig)
  settings_lib.check_together(stage.settings)
  model = stage.settings.model
  if not model.random_init and stage.settings.grpo.beta:
    models.check_kl_reference(model.checkpoint, model.reference)
  return stage


def kl_reference(stage, beta: float) -> str:
  """Which model the KL reference is, as the report states it."""
  model = stage.settings.model
  if not beta:
    return "none (grpo.beta=0)"
  if model.random_init:
    return "the initial policy (a copy of the random policy)"
  if model.reference == model.checkpoint:
    return f"the initial policy (model.checkpoint={model.checkpoint!r})"
  return f"model.reference={model.reference!r}"


def check_fingerprint(stage, policy) -> dict:
  """The run fingerprint by the one rule, plus what the sources give."""
  return stage.check_fingerprint(
      **policy.fingerprint_fields(),
      pad_id=policy.tokenizer.pad_token_id,
      trace="stop-block",
  )


def train(cluster: Any, learner: Any, batches: Iterable[Any]) -> float:
  """Trains on `batches`, each item checked as it is read; returns the wall
  time of training alone, in seconds. A run resumed at `max_steps` trains
  no further, whichever the learner."""
  started = time.perf_counter()
  max_steps = cluster.cluster_config.training_config.max_steps
  if cluster.actor_trainer.train_steps < max_steps:
    learner.train(learner_lib.checked(batches, "train dataset"))
  return time.perf_counter() - started


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict:
  """Trains, evaluates, exports, reports; returns the report's content."""
  stage = validate(config)
  settings = stage.settings
  model = settings.model
  policy = sources_lib.read_converted(stage, "checkpoint", settings.rollout)
  train_prompts, eval_prompts = prompt_stream.train_and_eval_prompts(
      policy,
      settings.data,
      num_eval=settings.eval.num_prompts,
      max_prompt_length=settings.rollout.max_prompt_length,
  )
  fingerprint = check_fingerprint(stage, policy)

  meshes = meshes_lib.build(settings.mesh)
  meshes_lib.check_model_axes(models.abstract(model, "checkpoint"), meshes)
  actor, reference = models.load_policy_and_reference(
      model,
      meshes.actor,
      meshes.reference,
      with_reference=settings.grpo.beta > 0,
      seed=config.seed,
  )
  policy.validate_for_model(actor.config)
  held_out = functools.partial(
      evaluation.evaluate,
      prompts=eval_prompts,
      bd=policy.bd,
      decode=policy.decode,
      settings=settings.eval,
      tokenizer=policy.tokenizer,
  )
  with mesh_lib.tunix_context(meshes.actor):
    before = held_out(actor)
    with stage.restoring():  # The newest checkpoint, one line if bad.
      cluster, learner = wiring.build_grpo(
          settings,
          actor=actor,
          reference=reference,
          sources=policy,
          meshes=meshes,
          workdir=stage.workdir,
          logits_chunk=model.chunk,
          fingerprint=fingerprint,
      )
    restored = cluster.actor_trainer.train_steps
    stage.start(
        restored,
        # The actor logs by update step, the rest by (0-based) global step.
        relogged_from=lambda name: (
            restored + 1 if name.startswith("actor/") else cluster.global_steps
        ),
    )
    batches = prompt_stream.items(
        train_prompts, batch_size=settings.train.batch_size, seed=config.seed
    )
    train_seconds = train(cluster, learner, batches)
    after = held_out(cluster.actor_trainer.model)
    continued_sft = None
    if model.continued_sft:
      continued_sft = held_out(
          models.load_checkpoint(model.continued_sft, meshes.actor, model)
      )

  export_dir = policy.export.write(
      cluster.actor_trainer.model,
      policy.tokenizer,
      policy.bd,
      stop_ids=policy.decode.stop_ids,
      extra={
          "grpo": {
              "from": stage.provenance("checkpoint"),
              **dataclasses.asdict(settings.grpo),
          },
          "precision": settings.model.provenance(),
      },
  )
  content = report.write_report(
      stage.workdir,
      settings,
      before=before,
      after=after,
      continued_sft=continued_sft,
      steps=cluster.actor_trainer.train_steps,
      train_seconds=train_seconds,
      kl_reference=kl_reference(stage, settings.grpo.beta),
  )
  print(f"policy exported to {export_dir}")
  return content
