# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionGRPOLearner`: Tunix's GRPO learner on block-diffusion traces.

Tunix's `GRPOLearner` owns the loop, advantages, optimizer, checkpoints and
metrics; this subclass checks the dataset and replaces only the step that
turns prompts into a `TrainExample` (Tunix's private
`_generate_and_compute_advantage`, pinned by `compat.PRIVATE_SURFACE`), so
that every policy scores the rollout's own trace (docs/design.md "RL
policies on one trace").
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Iterator, Mapping

import jax
import numpy as np
from tunix_bd import compat
from tunix_bd.rl import cluster as cluster_lib
from tunix_bd.rl import policy_loss

Mode = compat.Mode
Role = compat.Role


def check_dataset_item(item: Mapping[str, Any], where: str) -> None:
  """Fails closed (a ValueError naming `where` and the key) on a dataset
  item Tunix would silently mangle: `prompts` must be a non-empty 1-D
  `np.ndarray` of str and every other value a 1-D array of its length."""
  if not isinstance(item, Mapping) or "prompts" not in item:
    raise ValueError(f"{where}: an item must be a dict with 'prompts'.")
  prompts = item["prompts"]
  if (
      not isinstance(prompts, np.ndarray)
      or prompts.ndim != 1
      or not prompts.size
      or not all(isinstance(p, str) for p in prompts.tolist())
  ):
    raise ValueError(
        f"{where}: 'prompts' must be a non-empty 1-D np.ndarray of str (a"
        " list would be repeated element-wise by Tunix), got"
        f" {type(prompts).__name__}."
    )
  for key, value in item.items():
    shape = np.shape(value)
    if not isinstance(value, np.ndarray) or shape != prompts.shape:
      raise ValueError(
          f"{where}: field {key!r} must be a 1-D np.ndarray of"
          f" {len(prompts)} values like 'prompts', got"
          f" {type(value).__name__} of shape {shape}."
      )


def old_logps_and_weights(
    trace_action_logp: np.ndarray,
    action_mask: np.ndarray,
    anchor_fn: Callable[[], np.ndarray],
    *,
    needs_old: bool,
    algo_config: Any,
    verify: bool = False,
) -> tuple[np.ndarray | None, np.ndarray | None]:
  """`(old_per_token_logps, sampler_is_weights)`, as Tunix sources them.

  Inputs and outputs are float32 `[batch, T]` (`action_mask` bool) or None;
  `anchor_fn` replays the trace under the anchor, called only when needed
  or `verify` (a parity check) asks; `needs_old`: several updates use the
  rollout. Under `sampler_is="token"`: the anchor, and `min(exp(clip(anchor
  - rollout, +-20)), threshold)` on the actions; else, when `needs_old`, the
  rollout's log-probs with `use_rollout_logps`, the anchor without.
  """
  use_rollout, sampler_is, threshold = compat.grpo_old_logps_source(algo_config)
  anchor = None
  if sampler_is == "token" or (needs_old and not use_rollout) or verify:
    anchor = anchor_fn()
  if sampler_is == "token":
    bound = policy_loss.LOG_RATIO_BOUND
    log_ratio = np.clip(anchor - trace_action_logp, -bound, bound)
    weights = np.minimum(np.exp(log_ratio), threshold) * action_mask
    return anchor, weights.astype(np.float32)
  if not needs_old:
    return None, None
  if use_rollout:
    rollout = np.where(action_mask, trace_action_logp, 0.0)
    return rollout.astype(np.float32), None
  return anchor, None


def checked(dataset: Iterable[Mapping[str, Any]], name: str) -> Iterator:
  """`dataset`'s items, each checked (`check_dataset_item`) as it is read."""
  for index, item in enumerate(dataset):
    check_dataset_item(item, f"{name} item {index}")
    yield item


class DiffusionGRPOLearner(compat.GRPOLearner):
  """GRPO / token-level GSPO whose policies all score the rollout's trace."""

  def __init__(
      self,
      rl_cluster: cluster_lib.DiffusionRLCluster,
      algo_config: compat.GRPOConfig,
      reward_fns,
      metric_fns=None,
      data_shuffle_seed: int | None = None,
      verify_replay_every_n_steps: int = 0,
  ):
    """Checks the wiring, then builds Tunix's learner. Reward functions also
    receive `num_forwards` and `num_completion_tokens`;
    `verify_replay_every_n_steps` > 0 logs the replay parity that often."""
    if not isinstance(rl_cluster, cluster_lib.DiffusionRLCluster):
      raise ValueError(
          "DiffusionGRPOLearner needs a DiffusionRLCluster, got"
          f" {type(rl_cluster).__name__}."
      )
    if algo_config.policy_loss_fn != policy_loss.POLICY_LOSS_NAME:
      raise ValueError(
          f"grpo.policy_loss_fn={algo_config.policy_loss_fn!r} would score a"
          " diffusion trace autoregressively; use"
          f" {policy_loss.POLICY_LOSS_NAME!r}."
      )
    training = rl_cluster.cluster_config.training_config
    if training.max_seq_token_per_tpu is not None:
      raise ValueError(
          "training_config.max_seq_token_per_tpu (sequence packing) is not"
          " supported: a packed row would mix traces."
      )
    if algo_config.beta != 0.0 and not rl_cluster.has_reference():
      raise ValueError(
          f"grpo.beta={algo_config.beta} needs a reference model; pass one"
          " to the cluster or set beta=0."
      )
    if jax.process_count() > 1:
      raise ValueError(
          "diffusion GRPO runs single-controller (one JAX process, as on"
          f" Pathways); got {jax.process_count()} processes."
      )
    super().__init__(
        rl_cluster=rl_cluster,
        algo_config=algo_config,
        reward_fns=reward_fns,
        metric_fns=metric_fns,
        data_shuffle_seed=data_shuffle_seed,
    )
    # Tunix's learner calls the registered loss with fixed keywords; bind
    # the rollout's model call so the live replay scores as it sampled.
    loss = policy_loss.diffusion_grpo_loss
    rollout = self.rl_cluster.rollout
    self.rl_cluster.actor_trainer.with_loss_fn(
        lambda model, train_example, algo_config: loss(
            model,
            train_example,
            algo_config=self.algo_config,
            pad_id=rollout.pad_id(),
            eos_id=rollout.eos_id(),
            cached_logits_fn=rollout.cached_logits_fn,
            logits_chunk=rollout.logits_chunk,
        ),
        has_aux=True,
    )
    self._verify_every = verify_replay_every_n_steps
    self._updates_per_rollout = self.algo_config.num_iterations
    self.rl_cluster.actor_trainer.with_rl_metrics_to_log({
        "kl": np.mean,
        "pg_clipfrac": np.mean,
        "ppo_kl": np.mean,
        "is_ratio/mean": np.mean,
        "is_ratio/min": np.min,
        "is_ratio/max": np.max,
        "sampler_is/weight_mean": np.mean,
        "sampler_is/weight_min": np.min,
    })

  def train(self, train_ds, eval_ds=None, skip_jit: bool = False) -> None:
    """Tunix's loop over checked datasets. A run resumed at `max_steps`
    returns at once: Tunix's loop would take one more step first."""
    training_config = self.rl_cluster.cluster_config.training_config
    if self.rl_cluster.actor_trainer.train_steps >= training_config.max_steps:
      return
    train_ds = checked(train_ds, "train dataset")
    first = next(train_ds)
    full_batch = len(first["prompts"])
    mini_batch = training_config.mini_batch_size or full_batch
    # Every update after the first of a rollout runs on moved weights.
    self._updates_per_rollout = self.algo_config.num_iterations * max(
        1, full_batch // mini_batch
    )

    eval_ds = None if eval_ds is None else list(checked(eval_ds, "eval"))
    super().train(itertools.chain([first], train_ds), eval_ds, skip_jit)

  def _generate_and_compute_advantage(
      self, training_input: dict[str, Any], mode: Mode = Mode.TRAIN
  ) -> policy_loss.DiffusionTrainExample:
    """Rolls out, scores ref and old by replay, and computes advantages."""
    prompts = list(training_input["prompts"])
    extra = {k: v for k, v in training_input.items() if k != "prompts"}
    num_generations = self.algo_config.num_generations
    cluster = self.rl_cluster
    out = cluster.generate(
        prompts=prompts,
        mode=mode,
        micro_batch_size=self._rollout_micro_batch_size * num_generations,
        trace_tags={"step": cluster.global_steps},
    )
    trace = out.trace
    logps_batch = self._compute_logps_micro_batch_size * num_generations

    ref = None
    if self.algo_config.beta != 0.0:
      with compat.grpo_perf_span(
          cluster, "refer_inference", role=Role.REFERENCE
      ) as end:
        ref = cluster.reference_replay_logps(trace, logps_batch)
        end([ref])
    old, weights = old_logps_and_weights(
        np.asarray(trace.action_logp),
        np.asarray(trace.action_step) >= 0,
        lambda: cluster.anchor_replay_with_parity(trace, logps_batch, mode),
        needs_old=mode == Mode.TRAIN and self._updates_per_rollout > 1,
        algo_config=self.algo_config,
        verify=cluster.replay_check_due(self._verify_every, mode),
    )

    visible = np.asarray([len(t) for t in out.tokens], np.int32)
    with compat.grpo_perf_span(cluster, "advantage_computation"):
      rewards = self._compute_rewards(
          prompts=prompts,
          completions=out.text,
          mode=mode,
          num_forwards=out.num_forwards,
          num_completion_tokens=visible,
          **extra,
      )
      estimator = compat.get_advantage_estimator(
          self.algo_config.advantage_estimator
      )
      advantages = estimator(rewards=rewards, num_generations=num_generations)
    # Tunix's reward and length metrics, plus tokens per forward.
    cluster.buffer_metrics(
        {
            "rewards/score/mean": (np.mean(rewards), np.mean),
            "rewards/score/max": (np.max(rewards), np.max),
            "rewards/score/min": (np.min(rewards), np.min),
            "completions/mean_length": (np.mean(visible), np.mean),
            "completions/max_length": (np.max(visible), np.max),
            "completions/min_length": (np.min(visible), np.min),
            **cluster_lib.speed_metrics(visible, out.num_forwards),
        },
        mode=mode,
    )
    for metric_fn in self.metric_fns:
      cluster.buffer_metrics(
          metric_fn(
              prompts=prompts,
              completions=out.text,
              advantages=advantages,
              rewards=rewards,
              **extra,
          ),
          mode=mode,
      )
    return policy_loss.DiffusionTrainExample.from_trace(
        trace,
        pad_id=cluster.rollout.pad_id(),
        advantages=np.asarray(advantages, np.float32),
        ref_per_token_logps=ref,
        old_per_token_logps=old,
        sampler_is_weights=weights,
    )
