# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Builds Tunix's RL objects for a block-diffusion policy, in one place.

Tunix's per-mode `RolloutConfig`, the `DiffusionRLCluster` and the
`grpo.learner`, which the recipe, the benchmark and the tests share;
`build_grpo` assembles them all from a checked GRPO config.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import jax

from tunix_bd import compat
from tunix_bd.core import replay
from tunix_bd.generate import settings as generate_settings
from tunix_bd.rl import cluster as cluster_lib
from tunix_bd.rl import learner as learner_lib
from tunix_bd.rl import meshes as meshes_lib
from tunix_bd.rl import policy_loss
from tunix_bd.rl import rewards
from tunix_bd.rl import rollout as rollout_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.training import options
from tunix_bd.training import progress

Mode = compat.Mode
Role = compat.Role


def rollout_configs(
    rollout: generate_settings.GrpoRollout,
) -> dict[Mode, compat.RolloutConfig]:
  """Tunix's per-mode rollout configs of the `rollout` section; no vocabulary
  filter is set."""
  return {
      mode: compat.RolloutConfig(
          max_tokens_to_generate=rollout.max_new_tokens,
          max_prompt_length=rollout.max_prompt_length,
          temperature=temp,
          top_p=None,
          top_k=None,
      )
      for mode, temp in (
          (Mode.TRAIN, rollout.temperature),
          (Mode.EVAL, rollout.eval_temperature),
      )
  }


def role_to_mesh(actor, reference=None, rollout=None) -> dict[Role, Any]:
  """Tunix's `ClusterConfig.role_to_mesh`; a role given no mesh shares the
  actor's (one mesh for all: the rollout decodes with the actor itself)."""
  return {
      Role.ACTOR: actor,
      Role.REFERENCE: actor if reference is None else reference,
      Role.ROLLOUT: actor if rollout is None else rollout,
  }


def build_cluster(
    *,
    actor,
    reference,
    tokenizer,
    training_config: compat.RLTrainingConfig,
    rollout_config: Mapping[Mode, compat.RolloutConfig],
    role_to_mesh: Mapping[Role, jax.sharding.Mesh],
    fingerprint: Mapping[str, Any] | None = None,
    **rollout: Any,
) -> cluster_lib.DiffusionRLCluster:
  """A `DiffusionRLCluster` whose rollout engine is a `DiffusionRollout`.

  `reference` may be None (then `beta` must be 0); `rollout` are the
  `DiffusionRollout`'s own keywords (`bd`, `decode`, `seed`, ...).
  """
  engine = functools.partial(rollout_lib.DiffusionRollout, **rollout)
  cluster_config = compat.ClusterConfig(
      role_to_mesh=dict(role_to_mesh),
      rollout_engine=engine,
      offload_to_cpu=False,
      training_config=training_config,
      rollout_config=dict(rollout_config),
  )
  return cluster_lib.DiffusionRLCluster(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer,
      cluster_config=cluster_config,
      fingerprint=fingerprint,
  )


def build_learner(
    cluster: cluster_lib.DiffusionRLCluster,
    *,
    reward_fns,
    verify_replay_every_n_steps: int = 0,
    learner: str = settings_lib.TUNIX_BD_LEARNER,
    **algo: Any,
) -> compat.GRPOLearner:
  """The `grpo.learner`: tunix_bd's, or Tunix's own on prepared rollouts.

  `learner` is `grpo.learner`; under `tunix`, Tunix's learner scores by
  `replay.ReplayLogitsFn` over the rollout's model call, and the cluster
  logs the replay parity (`DiffusionRLCluster.log_rollout_checks`) unless
  Tunix's learner does. `algo` are `compat.grpo_config`'s fields.
  """
  if learner == settings_lib.TUNIX_LEARNER:
    # Tunix's learner logs the parity itself whenever it replays the
    # anchor for old log-probs (`num_iterations > 1`).
    recomputes_old = algo.get("num_iterations", 1) > 1
    cluster.log_rollout_checks(
        0 if recomputes_old else verify_replay_every_n_steps
    )
    rollout = cluster.rollout
    return compat.GRPOLearner(
        rl_cluster=cluster,
        algo_config=compat.grpo_config(policy_loss_fn="grpo", **algo),
        reward_fns=reward_fns,
        diffusion_logits_fn=replay.ReplayLogitsFn(
            rollout.bd, rollout.cached_logits_fn
        ),
    )
  return learner_lib.DiffusionGRPOLearner(
      cluster,
      compat.grpo_config(policy_loss_fn=policy_loss.POLICY_LOSS_NAME, **algo),
      reward_fns,
      verify_replay_every_n_steps=verify_replay_every_n_steps,
  )


def build_grpo(
    run: settings_lib.GrpoConfig,
    *,
    actor,
    reference,
    sources,
    meshes: meshes_lib.RoleMeshes,
    workdir: str,
    logits_chunk: int | None = None,
    fingerprint: Mapping[str, Any] | None = None,
) -> tuple[cluster_lib.DiffusionRLCluster, compat.GRPOLearner]:
  """`(cluster, learner)` of a GRPO run, its checkpoint (if any) restored.

  The cluster trains `actor` in `workdir` with the policy's converted
  `sources` (tokenizer, `bd`, `decode`), printing a progress line per step.
  """
  base = options.training_config(run.train, workdir, "GRPO")
  base.data_sharding_axis = meshes.data_sharding_axes
  # Tunix's RL config derives gradient accumulation from its batch sizes.
  fields = {
      f.name: getattr(base, f.name)
      for f in dataclasses.fields(base)
      if f.init and f.name != "gradient_accumulation_steps"
  }
  cluster = build_cluster(
      actor=actor,
      reference=reference,
      tokenizer=sources.tokenizer,
      bd=sources.bd,
      training_config=compat.RLTrainingConfig(
          **fields,
          actor_optimizer=options.optimizer(run.train),
          mini_batch_size=run.train.mini_batch_size,
          train_micro_batch_size=run.train.train_micro_batch_size,
      ),
      decode=sources.decode,
      seed=run.rollout.seed,
      rollout_config=rollout_configs(run.rollout),
      logits_chunk=logits_chunk,
      role_to_mesh=role_to_mesh(meshes.actor, meshes.reference, meshes.rollout),
      fingerprint=fingerprint,
  )
  cluster.actor_trainer.with_training_hooks(
      progress.ProgressLines(
          run.description,
          latest=[
              ("rewards", "sum", "reward"),
              ("diffusion", "tokens_per_forward", "tok/fwd"),
          ],
      )
  )
  learner = build_learner(
      cluster,
      reward_fns=rewards.reward_fns(run.reward),
      **dataclasses.asdict(run.grpo),
  )
  return cluster, learner
