# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""One GRPO step's arms, phase by phase: diffusion GRPO vs Tunix's AR GRPO.

`bench_rl` builds two GRPO learners as their recipes build them, on the
same prompts with the same group size G, batch and token budget:

  * diffusion: tunix_bd's `DiffusionRLCluster` / `DiffusionGRPOLearner` on
    the converted block-diffusion model (rollouts by parallel block
    denoising; reference, old and live log-probs by replay of the trace);
  * AR: Tunix's own `RLCluster` / `GRPOLearner` with the stock `vanilla`
    rollout engine and `grpo` loss on the AR teacher.

Each learner first builds one `TrainExample` through its own
`_generate_and_compute_advantage` (rollout, reference and old log-probs,
rewards, advantages). Its `step_phases.Arm` then runs each phase once per
call:

  rollout    `generate` of B x G completions (fresh samples each round);
  reference  reference log-probs of the warm-up example's completions;
  old        old-policy log-probs of them;
  train      `update_actor` on the warm-up example: live log-probs, the
             loss, backward and the optimizer update, through Tunix's
             trainer (as the learner calls it);
  sync       the learner's end of a step: `sync_weights` (rollout weights
             and the anchor snapshot) unless the rollout shares the
             actor's weights, as both rollouts do on one mesh.

The typed sections of `bench_rl`'s config (`model`, `bench`) are here too.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from flax import nnx
import jax
import optax

from benchmarks import step_phases
from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import canvases as canvases_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import sections
from tunix_bd.rl import rewards as rewards_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring
from tunix_bd.run import models
from tunix_bd.run import provenance
from tunix_bd.run import sources

Mode = compat.Mode
_CHECKPOINT = config_utils.CHECKPOINT


@dataclasses.dataclass(frozen=True, kw_only=True)
class GrpoStepModelSettings(sections.RandomInit):
  """`bench_rl`'s `model`: the two policies, each its own KL reference.

  The keys of a random model (`sections.RandomInit`) and:

  Attributes:
    checkpoint: the block-diffusion policy, a converted model.
    ar_checkpoint: the AR policy (Tunix's GRPO); one tokenizer with the
      converted model's, but for its mask token.
  """

  checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  ar_checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )

  def directory_hint(self, key: str) -> str:
    del key
    return f"; on the embedded default {sections.RUN_THE_QUICKSTART}"

  def check_model_files(self) -> None:
    """Fails closed on a checkpoint directory without a `config.json`."""
    for key, path in provenance.checkpoint_directories(self).items():
      if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(
            f"model.{key}={path!r} is not a model directory"
            f"{self.directory_hint(key)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GrpoStepSettings:
  """`bench_rl`'s `bench`: the batch, the rate and the rounds timed.

  Attributes:
    num_prompts: the first prompts of the seeded GRPO prompt stream; each
      is rolled out `grpo.num_generations` times.
    learning_rate: 0 keeps both policies fixed, so every round does the
      same work (Adam still computes its full update).
    warmup_rounds: untimed rounds first (compilation).
    repeats: timed interleaved rounds; each phase keeps its median.
  """

  num_prompts: int = 16
  learning_rate: float = 0.0
  warmup_rounds: int = 2
  repeats: int = 10

  def __post_init__(self):
    for key in ("num_prompts", "warmup_rounds", "repeats"):
      config_utils.check_int(f"bench.{key}", getattr(self, key), 1)
    config_utils.check_number("bench.learning_rate", self.learning_rate, 0)


def tokenizers_and_bd(model: GrpoStepModelSettings, chat_template: str):
  """`(diffusion tokenizer, AR tokenizer, bd)`; the same prompts for both.

  Raises:
    ValueError: if `model.ar_checkpoint` is a block-diffusion model or its
      tokenizer differs from the diffusion model's (but for a mask token).
  """
  if model.random_init:
    tokenizer, bd = sources.random_tokenizer_and_bd(
        model.scratch_bd, chat_template
    )
    return tokenizer, tokenizer, bd
  path = model.ar_checkpoint
  tokenizer = tokenizer_lib.load_tokenizer(
      model.checkpoint, chat_template, key="model.checkpoint"
  )
  ar_tokenizer = tokenizer_lib.load_tokenizer(
      path, chat_template, key="model.ar_checkpoint"
  )
  try:
    teacher_lib.check_compatible(path, ar_tokenizer, tokenizer)
  except ValueError as error:
    raise ValueError(f"model.ar_checkpoint={path!r}: {error}") from error
  return tokenizer, ar_tokenizer, bd_config_lib.load_settings(model.checkpoint)


def _policy_and_reference(model, checkpoint: str, seed: int, mesh):
  """Two copies of one model: the policy and its KL reference."""
  if model.random_init:
    return [
        from_scratch.embedded_model(model.scratch, seed, mesh) for _ in "ab"
    ]
  return [models.load_checkpoint(checkpoint, mesh) for _ in "ab"]


def _training_config(bench: GrpoStepSettings) -> compat.RLTrainingConfig:
  """One mini-batch of all prompts per step, no checkpoints or logs."""
  batch = bench.num_prompts
  return compat.RLTrainingConfig(
      actor_optimizer=optax.adamw(bench.learning_rate),
      eval_every_n_steps=10**9,
      max_steps=None,
      metrics_logging_options=None,
      mini_batch_size=batch,
      train_micro_batch_size=batch,
      rollout_micro_batch_size=batch,
      compute_logps_micro_batch_size=batch,
  )


def _first_example(learner, item):
  """The learner's own `TrainExample` of `item` (prompts repeated G times).

  Its rollout, reference and old log-probs, rewards and advantages, by the
  hook Tunix's loop calls once per batch.
  """
  # pylint: disable-next=protected-access
  return learner._generate_and_compute_advantage(dict(item))


def _blocked(fn: Callable[[], Any]) -> Callable[[], Any]:
  return lambda: jax.block_until_ready(fn())


def _train_phase(cluster, example) -> Callable[[], Any]:
  """One optimizer update on `example` through Tunix's trainer."""

  def train():
    cluster.update_actor([example], None)
    return nnx.state(cluster.actor_trainer.model)

  return _blocked(train)


def _sync_phase(learner) -> Callable[[], Any]:
  """The learner's end of a global step: a weight sync where it needs one."""
  cluster = learner.rl_cluster

  def sync():
    if learner.should_sync_weights:
      cluster.sync_weights()
    else:  # The rollout shares the actor's weights; Tunix only counts.
      cluster.global_steps += 1
    return nnx.state(cluster.rollout.model())

  return _blocked(sync)


def diffusion_arm(stage, tokenizer, bd, item, mesh):
  """`(arm, the warm-up example's trace)` of tunix_bd's GRPO."""
  settings = stage.settings
  rollout, grpo, model = settings.rollout, settings.grpo, settings.model
  actor, reference = _policy_and_reference(
      model, model.checkpoint, stage.config.seed, mesh
  )
  rows = len(item["prompts"])
  cluster = wiring.build_cluster(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer,
      bd=bd,
      training_config=_training_config(settings.bench),
      decode=rollout.denoise_config(tokenizer),
      seed=rollout.seed,
      rollout_config=wiring.rollout_configs(rollout),
      role_to_mesh=wiring.role_to_mesh(mesh),
  )
  learner = wiring.build_learner(
      cluster,
      reward_fns=rewards_lib.reward_fns(settings_lib.RewardSettings()),
      **dataclasses.asdict(grpo),
  )
  example = _first_example(learner, item)
  arm = step_phases.Arm(phases={})

  def generate():
    out = cluster.generate(list(item["prompts"]), mode=Mode.TRAIN)
    arm.visible_lengths.extend(len(t) for t in out.tokens)
    arm.forwards.extend(out.num_forwards.tolist())
    return out.num_forwards

  trace = example.trace
  arm.phases.update(
      rollout=generate,
      reference=_blocked(lambda: cluster.reference_replay_logps(trace, rows)),
      old=_blocked(lambda: cluster.anchor_replay_logps(trace, rows)),
      train=_train_phase(cluster, example),
      sync=_sync_phase(learner),
  )
  return arm, trace


def ar_arm(stage, tokenizer, item, mesh) -> step_phases.Arm:
  """The arm of Tunix's own GRPO with its `vanilla` rollout."""
  settings = stage.settings
  rollout, grpo, model = settings.rollout, settings.grpo, settings.model
  actor, reference = _policy_and_reference(
      model, model.ar_checkpoint, stage.config.seed + 1, mesh
  )
  rows = len(item["prompts"])
  # Tunix's default cache holds 1024 tokens; a user sizes it to the budget.
  cache = rollout.max_prompt_length + rollout.max_new_tokens
  configs = wiring.rollout_configs(rollout)
  rollout_config = {
      mode: dataclasses.replace(c, kv_cache_size=cache)
      for mode, c in configs.items()
  }
  cluster = compat.RLCluster(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer,
      cluster_config=compat.ClusterConfig(
          role_to_mesh=wiring.role_to_mesh(mesh),
          rollout_engine="vanilla",
          offload_to_cpu=False,
          training_config=_training_config(settings.bench),
          rollout_config=rollout_config,
      ),
  )
  algo = dataclasses.asdict(grpo)
  # Diffusion replay's and the diffusion learner's choice only.
  del algo["verify_replay_every_n_steps"], algo["learner"]
  learner = compat.GRPOLearner(
      cluster,
      compat.grpo_config(policy_loss_fn="grpo", **algo),
      rewards_lib.reward_fns(settings_lib.RewardSettings()),
  )
  example = _first_example(learner, item)
  arm = step_phases.Arm(phases={})
  pad_id, eos_id = cluster.rollout.pad_id(), cluster.rollout.eos_id()
  prompt_ids, completion_ids = example.prompt_ids, example.completion_ids

  def generate():
    out = cluster.generate(list(item["prompts"]), mode=Mode.TRAIN)
    arm.visible_lengths.extend(len(t) for t in out.tokens)
    return out.tokens

  arm.phases.update(
      rollout=generate,
      reference=_blocked(
          lambda: cluster.get_ref_per_token_logps(
              prompt_ids, completion_ids, pad_id, eos_id, rows
          )
      ),
      old=_blocked(
          lambda: cluster.get_old_per_token_logps(
              prompt_ids, completion_ids, rows
          )
      ),
      train=_train_phase(cluster, example),
      sync=_sync_phase(learner),
  )
  return arm


def replay_layout(trace, block_size: int) -> dict[str, int]:
  """What a replay forward holds: the clean context, groups of canvases."""
  num_canvases = canvases_lib.static_num_canvases(trace)
  context = canvases_lib.static_context_length(trace)
  return {
      "max_canvases_per_row": canvases_lib.count_canvases(trace),
      "canvases_per_group": canvases_lib.canvases_per_forward(
          block_size, num_canvases
      ),
      "context_positions": context,
      "tokens_per_row": context + num_canvases * block_size,
  }


def replay_line(layout) -> str:
  """The printed line under the table: the replay forward's layout."""
  return (
      "  diffusion replay: rows need at most"
      f" {layout['max_canvases_per_row']} canvases (a group of"
      f" {layout['canvases_per_group']} per forward) and"
      f" {layout['context_positions']} clean positions:"
      f" {layout['tokens_per_row']} tokens a row"
  )
