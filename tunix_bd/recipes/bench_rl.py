# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_rl`: one GRPO step, phase by phase, diffusion vs AR.

Two GRPO learners built as their recipes build them, on the same prompts
with the same group size G, batch and token budget:

  * diffusion: tunix_bd's `DiffusionRLCluster` / `DiffusionGRPOLearner` on
    the converted block-diffusion model (rollouts by parallel block
    denoising; reference, old and live log-probs by replay of the trace);
  * AR: Tunix's own `RLCluster` / `GRPOLearner` with the stock `vanilla`
    rollout engine and `grpo` loss on the AR teacher.

Each learner first builds one `TrainExample` through its own
`_generate_and_compute_advantage` (rollout, reference and old log-probs,
rewards, advantages); `warmup_rounds` untimed rounds then compile the
rest. `evaluation.step_phases` times the rounds, phases of both learners
alternating, and reports each phase's median:

  rollout    `generate` of B x G completions (fresh samples each round);
  reference  reference log-probs of the warm-up example's completions;
  old        old-policy log-probs of them;
  train      `update_actor` on the warm-up example: live log-probs, the
             loss, backward and the optimizer update, through Tunix's
             trainer (as the learner calls it);
  sync       the learner's end of a step: `sync_weights` (rollout weights
             and the anchor snapshot) unless the rollout shares the
             actor's weights, as Tunix's vanilla rollout on one mesh does.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from flax import nnx
import jax
import ml_collections
import numpy as np
import optax

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.benchmarking import step_phases
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import canvases as canvases_lib
from tunix_bd.core import replay
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd.rl import decode_settings
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import rewards as rewards_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring
from tunix_bd.run import models
from tunix_bd.run import workdir as workdir_lib

Mode = compat.Mode


def validate(config: ml_collections.ConfigDict):
  """`(RolloutSettings, GrpoSettings)`; fails closed before any compute."""
  for key in ("num_prompts", "repeats", "warmup_rounds"):
    config_utils.check_int(key, config[key], 1)
  rate = config.learning_rate
  if isinstance(rate, bool) or not (
      isinstance(rate, (int, float)) and np.isfinite(rate) and rate >= 0
  ):
    raise ValueError(
        "learning_rate must be a finite number >= 0, got"
        f" {config.learning_rate!r}."
    )
  workdir_lib.check(config.workdir)
  rollout = config_utils.from_section(
      decode_settings.RolloutSettings, config.rollout, "rollout"
  )
  grpo = config_utils.from_section(
      settings_lib.GrpoSettings, config.grpo, "grpo"
  )
  if not config.model.random_init:
    for key in ("checkpoint", "ar_checkpoint"):
      path = config.model[key]
      if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(
            f"model.{key}={path!r} is not a model directory; on the embedded"
            " default run the quickstart first (`tunix run --plugin"
            " tunix_bd quickstart.py`)."
        )
  return rollout, grpo


def _tokenizers_and_bd(config):
  """`(diffusion tokenizer, AR tokenizer, bd)`; the same prompts for both.

  Raises:
    ValueError: if `model.ar_checkpoint` is a block-diffusion model or its
      tokenizer differs from the diffusion model's (but for a mask token).
  """
  if config.model.random_init:
    tokenizer, bd = mask_token_lib.embedded_tokenizer_and_bd(
        **config.model.scratch_bd.to_dict()
    )
    tokenizer_lib.override_chat_template(tokenizer, config.data.chat_template)
    return tokenizer, tokenizer, bd
  path = config.model.ar_checkpoint
  template = config.data.chat_template
  tokenizer = tokenizer_lib.load_tokenizer(
      config.model.checkpoint, template, key="model.checkpoint"
  )
  ar_tokenizer = tokenizer_lib.load_tokenizer(
      path, template, key="model.ar_checkpoint"
  )
  try:
    teacher_lib.check_compatible(path, ar_tokenizer, tokenizer)
  except ValueError as error:
    raise ValueError(f"model.ar_checkpoint={path!r}: {error}") from error
  return (
      tokenizer,
      ar_tokenizer,
      bd_config_lib.load_settings(config.model.checkpoint),
  )


def _policy_and_reference(config, checkpoint: str, seed: int, mesh):
  """Two copies of one model: the policy and its KL reference."""
  if config.model.random_init:
    return [
        from_scratch.embedded_model(config.model.scratch, seed, mesh)
        for _ in "ab"
    ]
  return [models.load_checkpoint(checkpoint, mesh) for _ in "ab"]


def _training_config(config, batch: int) -> compat.RLTrainingConfig:
  """One mini-batch of `batch` prompts per step, no checkpoints or logs."""
  return compat.RLTrainingConfig(
      actor_optimizer=optax.adamw(config.learning_rate),
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


def _diffusion_arm(config, rollout, grpo, tokenizer, bd, item, mesh):
  """`(arm, the warm-up example's trace)`."""
  actor, reference = _policy_and_reference(
      config, config.model.checkpoint, config.seed, mesh
  )
  rows = len(item["prompts"])
  cluster = wiring.build_cluster(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer,
      bd=bd,
      stop_ids=rollout.stop_ids(tokenizer),
      training_config=_training_config(config, config.num_prompts),
      **wiring.rollout_arguments(rollout),
      role_to_mesh=wiring.shared_meshes(mesh),
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


def _ar_arm(config, rollout, grpo, tokenizer, item, mesh) -> step_phases.Arm:
  actor, reference = _policy_and_reference(
      config, config.model.ar_checkpoint, config.seed + 1, mesh
  )
  rows = len(item["prompts"])
  # Tunix's default cache holds 1024 tokens; a user sizes it to the budget.
  cache = rollout.max_prompt_length + rollout.max_new_tokens
  configs = wiring.rollout_arguments(rollout)["rollout_config"]
  rollout_config = {
      mode: dataclasses.replace(c, kv_cache_size=cache)
      for mode, c in configs.items()
  }
  cluster = compat.RLCluster(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer,
      cluster_config=compat.ClusterConfig(
          role_to_mesh=wiring.shared_meshes(mesh),
          rollout_engine="vanilla",
          offload_to_cpu=False,
          training_config=_training_config(config, config.num_prompts),
          rollout_config=rollout_config,
      ),
  )
  algo = dataclasses.asdict(grpo)
  del algo["verify_replay_every_n_steps"]  # Diffusion replay only.
  learner = compat.GRPOLearner(
      cluster,
      wiring.grpo_config(policy_loss_fn="grpo", **algo),
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


def run(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """Times both GRPO steps; prints the table and writes `bench_rl.json`."""
  rollout, grpo = validate(config)
  tokenizer, ar_tokenizer, bd = _tokenizers_and_bd(config)
  train_set = dataset_lib.train_conversations(config.data, "bench_rl")
  prompts = prompt_stream.render(
      tokenizer,
      train_set,
      rollout.max_prompt_length,
      chat.options_from_data(config.data),
  )
  item = next(
      prompt_stream.items(
          prompts, batch_size=config.num_prompts, seed=config.seed
      )
  )
  # Tunix's learner repeats each prompt G times before rolling out.
  item = {k: np.repeat(v, grpo.num_generations) for k, v in item.items()}
  mesh = mesh_lib.from_section(config.mesh)
  with mesh_lib.tunix_context(mesh):
    diffusion, trace = _diffusion_arm(
        config, rollout, grpo, tokenizer, bd, item, mesh
    )
    arms = {
        "diffusion": diffusion,
        "ar": _ar_arm(config, rollout, grpo, ar_tokenizer, item, mesh),
    }
    seconds = step_phases.time_rounds(
        arms, warmup=config.warmup_rounds, repeats=config.repeats
    )
  summary = step_phases.summarize(seconds, arms)
  # What a replay forward holds: the clean context, then groups of canvases.
  num_canvases = replay.static_num_canvases(trace)
  context = replay.static_context_length(trace)
  summary["replay"] = {
      "max_canvases_per_row": canvases_lib.count_canvases(trace),
      "canvases_per_group": replay.canvases_per_forward(
          bd.block_size, num_canvases
      ),
      "context_positions": context,
      "tokens_per_row": context + num_canvases * bd.block_size,
  }
  caption = (
      f"GRPO step benchmark: {config.num_prompts} prompts x"
      f" G={grpo.num_generations}, {rollout.max_new_tokens} new tokens,"
      f" block size {bd.block_size}, threshold {rollout.threshold:g},"
      f" T={rollout.temperature:g}; median of {config.repeats} interleaved"
      f" rounds on {jax.device_count()} {jax.devices()[0].platform}"
      " device(s)"
  )
  layout = summary["replay"]
  print(
      step_phases.format_table(summary, caption)
      + "\n  diffusion replay: rows need at most"
      f" {layout['max_canvases_per_row']} canvases (a group of"
      f" {layout['canvases_per_group']} per forward) and"
      f" {layout['context_positions']} clean positions:"
      f" {layout['tokens_per_row']} tokens a row"
  )
  report_lib.write_json(os.path.join(config.workdir, "bench_rl.json"), summary)
  return summary
