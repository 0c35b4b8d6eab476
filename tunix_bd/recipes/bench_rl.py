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
`_generate_and_compute_advantage` and trains on it (compiling every phase,
untimed). Then, round after round, the phases of both alternate (diffusion
rollout, AR rollout, diffusion reference, AR reference, ...), so a shared,
noisy machine slows both alike:

  rollout    `generate` of B x G completions (fresh samples each round);
  reference  reference log-probs of the warm-up example's completions;
  old        old-policy log-probs of them;
  train      `update_actor` on the warm-up example: live log-probs, the
             loss, backward and the optimizer update, through Tunix's
             trainer (as the learner calls it);
  sync       `sync_weights` (rollout weights and the anchor snapshot).

Each phase keeps the median of its rounds (every round's seconds are in
the JSON); the step is the sum of the phase medians.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Mapping

from flax import nnx
import jax
import ml_collections
import numpy as np
import optax

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import grpo as grpo_recipe
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import rewards as rewards_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.rl import wiring

Mode = compat.Mode
PHASES = ("rollout", "reference", "old", "train", "sync")
ARMS = ("diffusion", "ar")


@dataclasses.dataclass
class _Arm:
  """One learner's phases and what its rollouts produced.

  Attributes:
    phases: phase name -> a call that runs it once and blocks on its result.
    visible_lengths: visible completion tokens of every timed rollout row.
    forwards: model forwards of every timed rollout row (diffusion only).
  """

  phases: dict[str, Callable[[], Any]]
  visible_lengths: list[int] = dataclasses.field(default_factory=list)
  forwards: list[int] = dataclasses.field(default_factory=list)


def validate(config: ml_collections.ConfigDict):
  """`(RolloutSettings, GrpoSettings)`; fails closed before any compute."""
  for key in ("num_prompts", "repeats", "warmup_rounds"):
    config_utils.check_int(key, config[key], 1)
  if not (np.isfinite(config.learning_rate) and config.learning_rate >= 0):
    raise ValueError(
        "learning_rate must be a finite number >= 0, got"
        f" {config.learning_rate!r}."
    )
  if not config.workdir:
    raise ValueError("workdir must be set.")
  rollout = config_utils.from_section(
      settings_lib.RolloutSettings, config.rollout, "rollout"
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


def _policy_and_reference(config, checkpoint: str, seed: int, mesh):
  """Two copies of one model: the policy and its KL reference."""
  if config.model.random_init:
    scratch = config_utils.from_section(
        from_scratch.ScratchModelSettings, config.model.scratch, "model.scratch"
    )
    model_config = from_scratch.qwen3_config(scratch, tokenizer_lib.VOCAB_SIZE)
    return [from_scratch.init_model(model_config, seed, mesh) for _ in "ab"]
  with mesh:
    return [hf_checkpoint.load_qwen3(checkpoint, mesh=mesh)[0] for _ in "ab"]


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


def _diffusion_arm(config, rollout, grpo, tokenizer, bd, item, mesh) -> _Arm:
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
      commit=dict(
          rule=rollout.rule,
          threshold=rollout.threshold,
          top_k=rollout.top_k,
          factor=rollout.factor,
      ),
      use_cache=rollout.use_cache,
      seed=rollout.seed,
      training_config=_training_config(config, config.num_prompts),
      rollout_config=wiring.rollout_configs(
          max_new_tokens=rollout.max_new_tokens,
          max_prompt_length=rollout.max_prompt_length,
          temperature=rollout.temperature,
          eval_temperature=rollout.eval_temperature,
      ),
      role_to_mesh=wiring.shared_meshes(mesh),
  )
  learner = wiring.build_learner(
      cluster,
      reward_fns=rewards_lib.reward_fns(settings_lib.RewardSettings()),
      **dataclasses.asdict(grpo),
  )
  example = learner._generate_and_compute_advantage(dict(item))  # pylint: disable=protected-access
  arm = _Arm(phases={})

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
  return arm


def _ar_arm(config, rollout, grpo, tokenizer, item, mesh) -> _Arm:
  actor, reference = _policy_and_reference(
      config, config.model.ar_checkpoint, config.seed + 1, mesh
  )
  rows = len(item["prompts"])
  # Tunix's default cache holds 1024 tokens; a user sizes it to the budget.
  cache = rollout.max_prompt_length + rollout.max_new_tokens
  rollout_config = {
      mode: dataclasses.replace(c, kv_cache_size=cache)
      for mode, c in wiring.rollout_configs(
          max_new_tokens=rollout.max_new_tokens,
          max_prompt_length=rollout.max_prompt_length,
          temperature=rollout.temperature,
          eval_temperature=rollout.eval_temperature,
      ).items()
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
  algo = {k: v for k, v in dataclasses.asdict(grpo).items() if v is not None}
  learner = compat.GRPOLearner(
      cluster,
      compat.GRPOConfig(**algo),
      rewards_lib.reward_fns(settings_lib.RewardSettings()),
  )
  example = learner._generate_and_compute_advantage(dict(item))  # pylint: disable=protected-access
  arm = _Arm(phases={})
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


def time_rounds(
    arms: Mapping[str, _Arm], *, warmup: int, repeats: int
) -> dict[str, dict[str, list[float]]]:
  """Seconds of every phase of every arm, per timed round, interleaved.

  A round runs each phase of every arm in `PHASES` order, the arms
  alternating within a phase. The first `warmup` rounds are not kept.
  """
  seconds = {a: {p: [] for p in PHASES} for a in arms}
  for round_index in range(warmup + repeats):
    for phase in PHASES:
      for name, arm in arms.items():
        start = time.perf_counter()
        arm.phases[phase]()
        elapsed = time.perf_counter() - start
        if round_index >= warmup:
          seconds[name][phase].append(elapsed)
    if round_index + 1 == warmup:
      for arm in arms.values():  # Count the timed rollouts alone.
        arm.visible_lengths.clear()
        arm.forwards.clear()
  return seconds


def summarize(seconds, arms: Mapping[str, _Arm]) -> dict[str, Any]:
  """Per-phase medians and ratios, the step, and the rollouts' lengths."""
  median = {
      a: {p: float(np.median(seconds[a][p])) for p in PHASES} for a in ARMS
  }
  phases = {
      p: {
          "diffusion_s": median["diffusion"][p],
          "ar_s": median["ar"][p],
          "ratio": median["diffusion"][p] / max(median["ar"][p], 1e-12),
      }
      for p in PHASES
  }
  step = {a: sum(median[a].values()) for a in ARMS}
  diffusion = arms["diffusion"]
  return {
      "phases": phases,
      "step": {
          "diffusion_s": step["diffusion"],
          "ar_s": step["ar"],
          "ratio": step["diffusion"] / max(step["ar"], 1e-12),
      },
      "tokens_per_forward": float(
          sum(diffusion.visible_lengths) / max(sum(diffusion.forwards), 1)
      ),
      "mean_completion_length": {
          a: float(np.mean(arms[a].visible_lengths)) for a in ARMS
      },
      "seconds": seconds,
  }


def format_table(summary: Mapping[str, Any], caption: str) -> str:
  """The printed table: phase | diffusion s | AR s | ratio, then the step."""
  lines = [
      caption,
      f"  {'phase':<11}{'diffusion s':>13}{'AR s':>11}{'ratio':>9}",
  ]
  rows = [*summary["phases"].items(), ("step", summary["step"])]
  for name, row in rows:
    lines.append(
        f"  {name:<11}{row['diffusion_s']:>13.4f}{row['ar_s']:>11.4f}"
        f"{row['ratio']:>9.2f}"
    )
  lengths = summary["mean_completion_length"]
  lines.append(
      f"  diffusion rollout: {summary['tokens_per_forward']:.2f} tokens per"
      " forward; mean completion length: diffusion"
      f" {lengths['diffusion']:.1f}, AR {lengths['ar']:.1f} tokens"
  )
  return "\n".join(lines)


def run(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """Times both GRPO steps; prints the table and writes `bench_rl.json`."""
  rollout, grpo = validate(config)
  tokenizer, bd = grpo_recipe._tokenizer_and_bd(config)  # pylint: disable=protected-access
  if not config.model.random_init:
    ar_tokenizer = tokenizer_lib.load_tokenizer(config.model.ar_checkpoint)
    if fingerprint_lib.tokenizer_digest(
        ar_tokenizer
    ) != fingerprint_lib.tokenizer_digest(tokenizer):
      raise ValueError(
          "model.ar_checkpoint's tokenizer differs from model.checkpoint's;"
          " the two policies must read the same prompts."
      )
  train_set, _ = dataset_lib.conversations(config.data)
  prompts = prompt_stream.render(
      tokenizer, train_set, rollout.max_prompt_length
  )
  item = next(
      prompt_stream.items(
          prompts, batch_size=config.num_prompts, seed=config.seed
      )
  )
  # Tunix's learner repeats each prompt G times before rolling out.
  item = {k: np.repeat(v, grpo.num_generations) for k, v in item.items()}
  mesh = mesh_lib.from_section(config.mesh)
  with mesh:
    arms = {
        "diffusion": _diffusion_arm(
            config, rollout, grpo, tokenizer, bd, item, mesh
        ),
        "ar": _ar_arm(config, rollout, grpo, tokenizer, item, mesh),
    }
    seconds = time_rounds(
        arms, warmup=config.warmup_rounds, repeats=config.repeats
    )
  summary = summarize(seconds, arms)
  caption = (
      f"GRPO step benchmark: {config.num_prompts} prompts x"
      f" G={grpo.num_generations}, {rollout.max_new_tokens} new tokens,"
      f" block size {bd.block_size}, threshold {rollout.threshold:g},"
      f" T={rollout.temperature:g}; median of {config.repeats} interleaved"
      f" rounds on {jax.device_count()} {jax.devices()[0].platform}"
      " device(s)"
  )
  print(format_table(summary, caption))
  report_lib.write_json(os.path.join(config.workdir, "bench_rl.json"), summary)
  return summary
