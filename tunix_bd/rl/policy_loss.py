# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `"diffusion_grpo"` policy loss: GRPO / token-level GSPO on traces.

Importing this module registers `"diffusion_grpo"`: the live log-probs are
the replay of the rollout's own trace (`core.replay.replay_log_probs`), the
rest Tunix's `algo_core.grpo_loss_fn` (`grpo_objective`, pinned to it by
`policy_loss_test`). See docs/design.md "RL policies on one trace".
"""

from __future__ import annotations

import math
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd import compat
from tunix_bd.core import cached_logits
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import replay
from tunix_bd.core import trace as trace_lib

POLICY_LOSS_NAME = "diffusion_grpo"

# Tunix's bounds on the (per-token, resp. GSPO sequence) log-ratio.
LOG_RATIO_BOUND = 20.0
_GSPO_LOG_RATIO_MAX = 10.0

_masked_mean = compat.masked_mean


@flax.struct.dataclass(frozen=True)
class DiffusionTrainExample(compat.TrainExample):
  """Tunix's GRPO `TrainExample` plus the rollout's trace.

  The inherited fields are in Tunix's layout (`trace.to_tunix_layout`); the
  reference and old log-probs are replays of the same trace, or None. The
  loss takes its actions from the trace (`action_step >= 0`), never from
  `completion_mask`.

  Attributes:
    trace: the rollout's `Trace` (batch-major, so Tunix slices and shards
      it with the rest), or None, which the diffusion loss rejects.
    num_canvases: static canvases per row for the live replay
      (`canvases.static_num_canvases` of the concrete trace, a bound for any
      slice of it); None: every possible canvas.
    context_length: static clean positions per row, likewise
      (`canvases.static_context_length`); None: the whole budget.
  """

  trace: trace_lib.Trace | None = None
  num_canvases: int | None = flax.struct.field(pytree_node=False, default=None)
  context_length: int | None = flax.struct.field(
      pytree_node=False, default=None
  )

  @classmethod
  def from_trace(
      cls,
      trace: trace_lib.Trace,
      *,
      pad_id: int,
      advantages: Any,
      ref_per_token_logps: Any = None,
      old_per_token_logps: Any = None,
      sampler_is_weights: Any = None,
  ) -> DiffusionTrainExample:
    """The example of a concrete trace `[batch, ...]`: `pad_id` fills
    left-padding and never-generated slots; `advantages` are float `[batch]`,
    the per-token fields float `[batch, T]` or None."""
    return cls(
        **trace_lib.to_tunix_layout(trace, pad_id=pad_id),
        advantages=advantages,
        ref_per_token_logps=ref_per_token_logps,
        old_per_token_logps=old_per_token_logps,
        sampler_is_weights=sampler_is_weights,
        trace=trace,
        num_canvases=canvases.static_num_canvases(trace),
        context_length=canvases.static_context_length(trace),
    )


def grpo_objective(
    per_token_logps: jax.Array,
    train_example: compat.TrainExample,
    algo_config: Any,
) -> tuple[jax.Array, dict[str, Any]]:
  """Tunix's GRPO / `gspo-token` loss, given the live per-token log-probs.

  The math of `tunix.rl.algo_core.grpo_loss_fn` after its forward: the
  ratio against `old_per_token_logps` (None: 1), the PPO clip `[1 -
  epsilon, 1 + epsilon_high]`, the dual clip `epsilon_c`,
  `sampler_is_weights`, and `beta` times the KL to `ref_per_token_logps`; a
  ValueError for a shape other than `completion_mask`'s.
  `per_token_logps` is float `[batch, T]`, `completion_mask` `[batch, T]`
  selects the actions, `advantages` are `[batch]` (or `[batch, T]`);
  `algo_config` is a Tunix `GRPOConfig`. Returns the scalar loss and
  Tunix's aux dict of scalars (no `entropy`).
  """
  want = np.shape(train_example.completion_mask)
  for name, value in (
      ("per_token_logps", per_token_logps),
      ("train_example.old_per_token_logps", train_example.old_per_token_logps),
      ("train_example.ref_per_token_logps", train_example.ref_per_token_logps),
      ("train_example.sampler_is_weights", train_example.sampler_is_weights),
  ):
    if value is not None and np.shape(value) != want:
      raise ValueError(
          f"{name} has shape {np.shape(value)}, but completion_mask has {want}."
      )
  epsilon, epsilon_high, epsilon_c = compat.clip_epsilons(algo_config)
  agg_mode = algo_config.loss_agg_mode
  mask = train_example.completion_mask
  per_token_logps = jnp.astype(per_token_logps, jnp.float32)
  advantages = jnp.astype(train_example.advantages, jnp.float32)
  old = train_example.old_per_token_logps
  old = jax.lax.stop_gradient(per_token_logps) if old is None else old
  log_ratio = per_token_logps - jnp.astype(old, jnp.float32)
  # Recorded before clipping, as Tunix does.
  ppo_kl = _masked_mean(-log_ratio, mask)
  log_ratio = jnp.clip(log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
  if algo_config.loss_algo == "gspo-token":
    sequence = (log_ratio * mask).sum(axis=-1) / jnp.clip(mask.sum(-1), min=1)
    # The sequence ratio's value with each token's own gradient.
    log_ratio = (
        per_token_logps
        - jax.lax.stop_gradient(per_token_logps)
        + jax.lax.stop_gradient(sequence)[:, None]
    )
    log_ratio = jnp.clip(log_ratio, max=_GSPO_LOG_RATIO_MAX)
  is_ratio = jnp.exp(log_ratio)
  adv = advantages if advantages.ndim == 2 else advantages[:, None]

  pg_loss_1 = -adv * is_ratio
  pg_loss_2 = -adv * jnp.clip(is_ratio, 1 - epsilon, 1 + epsilon_high)
  per_token_loss = jnp.maximum(pg_loss_1, pg_loss_2).astype(jnp.float32)
  clipfrac = _masked_mean(jnp.greater(pg_loss_2, pg_loss_1), mask)
  # Dual clip: for negative advantages, the loss is at most -epsilon_c * adv.
  pg_loss_3 = per_token_loss if epsilon_c is None else -epsilon_c * adv
  clipfrac_lower = compat.aggregate_loss(
      ((per_token_loss > pg_loss_3) & (adv < 0.0)).astype(jnp.float32),
      mask,
      agg_mode,
  )
  per_token_loss = jnp.where(
      adv < 0.0, jnp.minimum(pg_loss_3, per_token_loss), per_token_loss
  )
  weights = train_example.sampler_is_weights
  if weights is not None:
    weights = weights.astype(jnp.float32)
    per_token_loss = per_token_loss * weights
  loss = compat.aggregate_loss(per_token_loss, mask, agg_mode)

  adv_all = jnp.broadcast_to(adv, mask.shape)
  aux = {
      "kl": 0.0,
      "kl_loss": 0.0,
      # 0.1.7's name of the policy term, and main's two.
      "pg_loss": loss,
      "reduced_pg_loss": compat.reduced_aggregate_loss(
          per_token_loss, mask, agg_mode
      ),
      "unreduced_pg_loss": loss,
      "pg_clipfrac": clipfrac,
      "ppo_kl": ppo_kl,
      "pg_clipfrac_lower": clipfrac_lower,
      # Tunix's diagnostics, over the actions.
      "is_ratio/mean": _masked_mean(is_ratio, mask),
      "is_ratio/max": jnp.max(jnp.where(mask > 0, is_ratio, 0.0)),
      "is_ratio/min": jnp.min(jnp.where(mask > 0, is_ratio, jnp.inf)),
      "log_ratio/abs_mean": _masked_mean(jnp.abs(log_ratio), mask),
      "pg_loss/unclipped_mean": _masked_mean(pg_loss_1, mask),
      "pg_loss/clipped_mean": _masked_mean(pg_loss_2, mask),
      "advantage/abs_mean": _masked_mean(jnp.abs(adv_all), mask),
      "advantage/max": jnp.max(jnp.where(mask > 0, adv_all, -jnp.inf)),
      "advantage/min": jnp.min(jnp.where(mask > 0, adv_all, jnp.inf)),
      "advantage/nonzero_frac": _masked_mean(
          (jnp.abs(adv_all) > 1e-8).astype(jnp.float32), mask
      ),
      "sampler_is/weight_mean": jnp.float32(1.0),
      "sampler_is/weight_min": jnp.float32(1.0),
  }
  if weights is not None:
    aux["sampler_is/weight_mean"] = _masked_mean(weights, mask)
    aux["sampler_is/weight_min"] = jnp.min(
        jnp.where(mask > 0, weights, jnp.inf)
    )
  if train_example.ref_per_token_logps is not None:
    kl = compat.compute_kl_divergence(
        per_token_logps,
        train_example.ref_per_token_logps,
        algo_config.kl_loss_mode,
        clamp_value=algo_config.kl_clamp_value,
    )
    aux["kl"] = jnp.astype(
        (kl * mask).sum() / jnp.clip(mask.sum(), min=1), jnp.float32
    )
    aux["kl_loss"] = compat.aggregate_loss(kl, mask, agg_mode)
    if algo_config.beta is not None and algo_config.beta != 0.0:
      loss = loss + algo_config.beta * aux["kl_loss"]
  return loss, aux


@compat.register_policy_loss_fn(POLICY_LOSS_NAME)
def diffusion_grpo_loss(
    model,
    train_example: DiffusionTrainExample,
    algo_config: Any,
    pad_id: int,
    eos_id: int,
    *,
    cached_logits_fn: diffusion_lm.CachedRowsFn = (
        cached_logits.block_rows_with_cache
    ),
    logits_chunk: int | None = None,
    **kwargs,
) -> tuple[jax.Array, dict[str, Any]]:
  """`grpo_objective` of the live log-probs `replay_log_probs(model,
  train_example.trace)`, in Tunix's policy-loss signature (jit-able);
  `cached_logits_fn` and `logits_chunk` are the rollout's.

  The completion mask is the trace's actions, whatever
  `train_example.completion_mask` holds: under `jit` a mask that disagreed
  could not be refused, only averaged over.
  """
  del pad_id, eos_id, kwargs
  trace = getattr(train_example, "trace", None)
  if trace is None:
    raise ValueError(
        f"train_example.trace is None: the {POLICY_LOSS_NAME!r} policy loss"
        " scores the rollout's trace by replay, so it needs a learner that"
        " passes a DiffusionTrainExample with its trace (the diffusion GRPO"
        " learner), not Tunix's stock GRPOLearner."
    )
  if not isinstance(trace, trace_lib.Trace):
    raise ValueError(
        "train_example.trace must be a tunix_bd.core.trace.Trace, got"
        f" {type(trace).__name__}."
    )
  if getattr(train_example, "segment_ids", None) is not None:
    raise ValueError(
        "train_example.segment_ids is set: packed sequences are not"
        f" supported by the {POLICY_LOSS_NAME!r} loss."
    )
  tokens = np.shape(trace.tokens)
  completion = np.shape(train_example.completion_ids)
  if tokens != completion:
    raise ValueError(
        f"train_example.trace.tokens has shape {tokens}, but completion_ids"
        f" has {completion}: the trace must span the completion width."
    )
  temperature = getattr(algo_config, "temperature", None)
  # Tunix reads temperature 0 (greedy) as 1, as a greedy trace records.
  if temperature is not None and not math.isclose(
      temperature or 1.0, trace.temperature, rel_tol=1e-6
  ):
    raise ValueError(
        f"algo_config.temperature={temperature} differs from the rollout"
        f" trace's temperature {trace.temperature}."
    )
  per_token_logps = replay.replay_log_probs(
      model,
      trace,
      cached_logits_fn=cached_logits_fn,
      num_canvases=getattr(train_example, "num_canvases", None),
      context_length=getattr(train_example, "context_length", None),
      logits_chunk=logits_chunk,
  )
  actions = train_example.replace(completion_mask=trace.action_step >= 0)
  return grpo_objective(per_token_logps, actions, algo_config)
