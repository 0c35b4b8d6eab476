# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one place that absorbs Tunix API moves between releases.

tunix_bd supports google-tunix 0.1.7 and Tunix main (0.1.8.dev: `RLEngine`,
`LossOutput` / `WeightedMetric`, `GRPOConfig.use_rollout_logps`). Every
other module takes Tunix's RL, SFT and distillation names from here
(`compat_test` checks it; `tunix.models` may be imported directly), as are
the Tunix behaviours relied on, every version check and every private name
reached (`PRIVATE_SURFACE`): a Tunix upgrade changes this file alone.
"""

# pylint: disable=g-import-not-at-top
import contextlib
import dataclasses
import importlib.metadata
import inspect
import sys
from typing import Any, Callable, Iterator

from flax import nnx
import jax
import jax.numpy as jnp
from tunix.distillation import distillation_trainer as _distillation_trainer
from tunix.distillation.strategies import base_strategy as _base_strategy
from tunix.generate import sampler as _sampler
from tunix.models.qwen2 import params as _qwen2_params
from tunix.perf.experimental import constants as _perf_constants
from tunix.rl import algo_core as _algo_core
from tunix.rl import common as _rl_common
from tunix.rl import function_registry as _function_registry
from tunix.rl import reshard as _reshard
from tunix.rl import rl_cluster as _rl_cluster
from tunix.rl import utils as _rl_utils
from tunix.rl.grpo import grpo_learner as _grpo_learner
from tunix.rl.rollout import base_rollout as _base_rollout
from tunix.sft import hooks as _hooks
from tunix.sft import metrics_logger as _metrics_logger
from tunix.sft import peft_trainer as _peft_trainer
from tunix.sft import progress_bar as _progress_bar
from tunix.sft import utils as _sft_utils

TUNIX_VERSION = importlib.metadata.version("google-tunix")

# Configs and enums by their 0.1.7 homes, which Tunix main re-exports from
# `tunix.common.configs` / `datatypes`: the same classes on both.
TrainingConfig = _peft_trainer.TrainingConfig
CacheConfig = _sampler.CacheConfig
RolloutConfig = _base_rollout.RolloutConfig
RLTrainingConfig = _rl_cluster.RLTrainingConfig
ClusterConfig = _rl_cluster.ClusterConfig
Role = _rl_cluster.Role
Mode = _rl_cluster.Mode

# SFT and distillation.
PeftTrainer = _peft_trainer.PeftTrainer
Sampler = _sampler.Sampler
TrainingHooks = _hooks.TrainingHooks
DataHooks = _hooks.DataHooks
MetricsLoggerOptions = _metrics_logger.MetricsLoggerOptions
TensorboardBackend = _metrics_logger.TensorboardBackend
DistillationTrainer = _distillation_trainer.DistillationTrainer
DistillationTrainingConfig = _distillation_trainer.TrainingConfig
DistillationTrainingInput = _distillation_trainer.TrainingInput
BaseStrategy = _base_strategy.BaseStrategy
is_lora_enabled = _sft_utils.is_lora_enabled

# RL. Tunix main renamed `RLCluster` to `RLEngine` and keeps the old name as
# an alias; the plug points below exist in 0.1.7 and main alike.
RLCluster = _rl_cluster.RLCluster
GRPOConfig = _grpo_learner.GRPOConfig
GRPOLearner = _grpo_learner.GRPOLearner
TrainExample = _grpo_learner.TrainExample
BaseRollout = _base_rollout.BaseRollout
RolloutOutput = _base_rollout.RolloutOutput
register_policy_loss_fn = _function_registry.register_policy_loss_fn
get_advantage_estimator = _function_registry.get_advantage_estimator
masked_mean = _algo_core.masked_mean
compute_kl_divergence = _rl_common.compute_kl_divergence
reshard_pytree = _reshard.reshard_pytree
put_params_on_memory_kind = _rl_utils.put_params_on_memory_kind

# Every non-public Tunix name tunix_bd reads, calls or overrides, by the
# Tunix class or function that defines it; `compat_test` pins each owner's
# source per version. `rl/learner.py` ports (replaces) the one method
# `GRPOLearner._generate_and_compute_advantage`, pinned on its own.
PRIVATE_SURFACE = {
    "PeftTrainer": (
        "_jitted_train_step_fn",
        "_jitted_eval_step_fn",
        "_lora_enabled",
        "_shard_optimizer",
        "_prepare_inputs",
        "_mode",
        "_buffered_train_metrics",
        "_buffered_eval_metrics",
        "_post_process_train_step",
        "_post_process_eval_step",
        "_log_metrics",
        "_write_train_metrics",
    ),
    "RLLearner": (
        "_rollout_micro_batch_size",
        "_compute_logps_micro_batch_size",
        "_compute_rewards",
    ),
    "RLCluster": (
        "_get_mesh_and_logical_axis_rules_cm",
        "_anchor_policy_state",
        "_default_memory_kind",
    ),
    "BaseStrategy": ("_teacher_forward_fn",),
    "GRPOLearner._generate_and_compute_advantage": (),
    "peft_trainer._default_loss_fn": (),
    "progress_bar._is_in_ipython": (),
    "qwen2_params._get_key_and_transform_mapping": (),
}

# sha256 of each owner's `inspect.getsource` (16 hex digits) per supported
# Tunix: 0.1.7 and CI's Tunix main with the diffusion SFT adapter (#1891,
# which touches none of these). A new digest is a decision: re-read the
# owner, port what changed.
PRIVATE_SURFACE_SHA256 = {
    "0.1.7": {
        "PeftTrainer": "1b5d9c4879e1b5ff",
        "RLLearner": "ccaf8b6188e0e357",
        "RLCluster": "0ff7a0e5b7264873",
        "BaseStrategy": "f814c1305908be59",
        "GRPOLearner._generate_and_compute_advantage": "c56268e58863fedb",
        "peft_trainer._default_loss_fn": "a04af624f5ef514b",
        "progress_bar._is_in_ipython": "f5ebc8ff01a23052",
        "qwen2_params._get_key_and_transform_mapping": "7ac3e3950bf65bd3",
    },
    "0.1.8.dev20260822": {
        "PeftTrainer": "2c0650ba64a7dfd9",
        "RLLearner": "cbab907d94af13e9",
        "RLCluster": "3df07294ca137fd2",  # `RLEngine`, aliased `RLCluster`.
        "BaseStrategy": "f814c1305908be59",
        "GRPOLearner._generate_and_compute_advantage": "a0acb61efdb36d0b",
        "peft_trainer._default_loss_fn": "3323f0d1d953da36",
        "progress_bar._is_in_ipython": "f5ebc8ff01a23052",
        "qwen2_params._get_key_and_transform_mapping": "7ac3e3950bf65bd3",
    },
}


# HF key -> Tunix Qwen2 path and transform: how Tunix's Qwen2 loader reads
# a checkpoint, which a Llama file (no q/k/v biases) is read with too.
# pylint: disable-next=protected-access
qwen2_key_mapping = _qwen2_params._get_key_and_transform_mapping

# Tunix's own diffusion contract (`DiffusionTokenBatch`, ...), on Tunix
# main; None on google-tunix 0.1.7, which keeps tunix_bd's own path.
try:
  from tunix import diffusion as tunix_diffusion
except ImportError:  # google-tunix 0.1.7.
  tunix_diffusion = None

# Tunix's diffusion SFT adapter (Tunix PR #1891, on main after 2026-08-21);
# None on google-tunix 0.1.7 and on main before it.
try:
  from tunix.sft import diffusion as tunix_sft_diffusion
except ImportError:  # google-tunix 0.1.7, Tunix main before PR #1891.
  tunix_sft_diffusion = None

# Tunix main's deferred-division metric and loss; 0.1.7 has neither.
_WeightedMetric = getattr(_sft_utils, "WeightedMetric", None)
_LossOutput = getattr(_sft_utils, "LossOutput", None)

# Tunix applies the MEAN of k micro-batch gradients (0.1.7's MultiSteps;
# main's `GradientAccumulator` with 1 per scalar loss), so `core.denominators`
# scales each micro-batch loss by k (`sft_accumulation_test` checks it).
ACCUMULATION_AVERAGES_GRADIENTS = True

# The RoPE base each decoder family (by `core.families` name) really
# rotates with; None means `ModelConfig.rope_theta`. In 0.1.7 and main,
# Qwen3's and Llama 3's `Attention` call `apply_rope` without the config's
# theta, so rotate with its default, 1e6; Qwen2 passes it. `families`
# refuses a config whose theta differs; `families_test` pins this table.
ROPE_THETA_APPLIED = {"qwen3": 1_000_000, "qwen2": None, "llama3": 1_000_000}


def hidden_states_flag(model: Any) -> str | None:
  """The keyword of `model(...)` that gives its hidden states
  (`skip_lm_head`, `output_hidden_states`), or None if it has neither."""
  call = getattr(type(model), "_unquantized_type", type(model)).__call__
  parameters = inspect.signature(call).parameters
  for flag in ("skip_lm_head", "output_hidden_states"):
    if flag in parameters:
      return flag
  return None


def final_hidden_states(
    model: Any,
    tokens: jax.Array,
    positions: jax.Array,
    cache: Any,
    attention_mask: jax.Array,
) -> tuple[jax.Array, Any]:
  """A Tunix decoder's forward up to its final norm, without its LM head.

  Tunix main's decoders take `skip_lm_head=True`; 0.1.7's Qwen3 and Qwen2
  sow the states (`output_hidden_states=True`) and apply the head, whose
  unused logits XLA drops under jit. Either way the call is `model(...)`,
  so its wrappers (qwix's LoRA) stay in effect. A model with neither flag
  (0.1.7's Llama 3) is refused (`lm_head.split_head` avoids the call).

  Returns:
    `(hidden [batch, length, embed] in the compute dtype, new_cache)`.
  """
  flag = hidden_states_flag(model)
  if flag == "skip_lm_head":
    return model(tokens, positions, cache, attention_mask, skip_lm_head=True)
  if flag is None:
    raise ValueError(
        f"{type(model).__name__} of google-tunix {TUNIX_VERSION} cannot"
        " return its hidden states (no skip_lm_head or output_hidden_states);"
        " set model.logits_chunk=0 to compute dense logits instead."
    )
  # Sowing mutates the module, which a JAX transform (scan, cond,
  # checkpoint) forbids on one made outside it: sow into a copy made here.
  copy = nnx.merge(*nnx.split(model))
  _, new_cache = copy(
      tokens, positions, cache, attention_mask, output_hidden_states=True
  )
  sown = nnx.pop(copy, nnx.Intermediate)["all_hidden_states"]
  return jax.tree.leaves(sown)[-1], new_cache


def _reduce_metric(value: Any) -> Any:
  """A Tunix loss or aux value as the number 0.1.7 returned: Tunix main's
  `WeightedMetric` (divided late) computed, anything else as it is."""
  if _WeightedMetric is not None and isinstance(value, _WeightedMetric):
    return value.compute()
  return value


def loss_and_aux(out: Any) -> tuple[jax.Array, dict[str, Any]]:
  """`(scalar loss, aux dict)` of a Tunix loss function's return: a
  `(loss, aux)` tuple (0.1.7), a `LossOutput` (main) or a bare loss, every
  `WeightedMetric` reduced; the loss stays differentiable."""
  if _LossOutput is not None and isinstance(out, _LossOutput):
    loss, aux = out.primary_loss, out.aux_metrics
  elif isinstance(out, tuple):
    loss, aux = out
  else:
    loss, aux = out, {}
  return _reduce_metric(loss), {k: _reduce_metric(v) for k, v in aux.items()}


def aggregate_loss(
    per_token_loss: jax.Array, mask: jax.Array, loss_agg_mode: str
) -> jax.Array:
  """Tunix's `rl.common.aggregate_loss` of `per_token_loss` over `mask`
  (both `[batch, T]`) as a scalar, on either version."""
  out = _rl_common.aggregate_loss(per_token_loss, mask, loss_agg_mode)
  return jnp.asarray(_reduce_metric(out))


def reduced_aggregate_loss(
    per_token_loss: jax.Array, mask: jax.Array, loss_agg_mode: str
) -> jax.Array:
  """Tunix main's eager `reduced_loss_agg` (its `reduced_pg_loss` metric):
  `aggregate_loss` but `sequence-mean-token-mean` divided by all rows, not
  the non-empty ones; on 0.1.7, `aggregate_loss` itself."""
  reduced = getattr(_rl_common, "reduced_loss_agg", None)
  if reduced is None:
    return aggregate_loss(per_token_loss, mask, loss_agg_mode)
  return reduced(per_token_loss, mask, loss_agg_mode)


def default_sft_loss(model, **batch) -> jax.Array:
  """The scalar of Tunix's default AR SFT loss (`PeftTrainer`'s own)."""
  # pylint: disable-next=protected-access
  return loss_and_aux(_peft_trainer._default_loss_fn(model, **batch))[0]


def grpo_config(**fields: Any) -> Any:
  """Tunix's `GRPOConfig`, old log-probs recomputed on the trainer (0.1.7
  always does; main defaults to the rollout's) unless `fields` say
  otherwise; main's fields are refused on a Tunix without them."""
  names = {f.name for f in dataclasses.fields(GRPOConfig)}
  if "use_rollout_logps" in names:
    fields.setdefault("use_rollout_logps", False)
  for name in ("use_rollout_logps", "sampler_is", "sampler_is_threshold"):
    if name in fields and name not in names:
      raise ValueError(
          f"grpo.{name} needs a Tunix with it (main); google-tunix"
          f" {TUNIX_VERSION} has none."
      )
  # 0.1.7's `GRPOConfig` lacks these; its loss `getattr`s them: set them.
  clips = {
      k: fields.pop(k) for k in ("epsilon_high", "epsilon_c") if k in fields
  }
  config = GRPOConfig(**fields)
  for name, value in clips.items():
    if value is not None:
      setattr(config, name, value)
  return config


def clip_epsilons(config: Any) -> tuple[float, float, float | None]:
  """`(epsilon, epsilon_high, epsilon_c)` of a `GRPOConfig`, as Tunix's
  loss reads them (`algo_core`): without the attribute, `epsilon_high` is
  `epsilon` and `epsilon_c` None (no dual clip)."""
  epsilon = config.epsilon
  high = getattr(config, "epsilon_high", epsilon)
  return epsilon, high, getattr(config, "epsilon_c", None)


def grpo_old_logps_source(config: Any) -> tuple[bool, str | None, float]:
  """`(use_rollout_logps, sampler_is, sampler_is_threshold)` of a
  `GRPOConfig`: Tunix main's fields, read on 0.1.7 (which has none) as
  `(False, None, 2.0)`: recompute on the trainer, no sampler correction."""
  return (
      bool(getattr(config, "use_rollout_logps", False)),
      getattr(config, "sampler_is", None),
      float(getattr(config, "sampler_is_threshold", 2.0)),
  )


# Each `perf` span of Tunix's GRPO learner and its `perf_v2` pair.
_PERF_V2_NAMES = {
    "refer_inference": _perf_constants.REFERENCE_INFERENCE,
    "old_actor_inference": _perf_constants.OLD_ACTOR_INFERENCE,
    "advantage_computation": _perf_constants.ADVANTAGE_COMPUTATION,
}


@contextlib.contextmanager
def grpo_perf_span(
    cluster: Any, name: str, *, role: Any = None
) -> Iterator[Callable[[Any], None]]:
  """A GRPO phase span as `GRPOLearner._generate_and_compute_advantage`
  writes it: `perf`'s `name` and its `perf_v2` pair, on `role`'s devices
  (None: none), tagged with the global step. Yields `end(outputs)`, which
  marks the phase's device work on `outputs` done."""
  devices = None if role is None else cluster.r2m[role].devices
  tags = {_perf_constants.STEP: cluster.global_steps}
  with cluster.perf.span(name, devices) as interval, cluster.perf_v2.span(
      _PERF_V2_NAMES[name], devices, tags=tags
  ) as interval_v2:

    def end(outputs):
      interval.device_end(outputs)
      interval_v2.async_end(outputs)

    yield end


def tunix_progress_bar_visible() -> bool:
  """Whether `PeftTrainer`'s tqdm bar draws (its own test, in 0.1.7)."""
  # pylint: disable-next=protected-access
  return _progress_bar._is_in_ipython() or sys.stderr.isatty()


def write_train_metrics(trainer: Any) -> None:
  """Writes the train metrics a `PeftTrainer` holds: Tunix writes an update
  step's at the next update, overlapping the write with that step."""
  trainer._write_train_metrics()  # pylint: disable=protected-access


def train_step_state_args(trainer: Any) -> tuple[str, ...] | None:
  """The trainer attributes Tunix's train step takes before `inputs`:
  `("model", "optimizer")` on 0.1.7, then `"grad_accumulator"` on main;
  None for a step of another shape."""
  if not hasattr(trainer, "_jitted_train_step_fn"):
    return None
  params = tuple(inspect.signature(trainer.create_train_step_fn()).parameters)
  if "inputs" not in params:
    return None
  state = params[: params.index("inputs")]
  if state[:2] != ("model", "optimizer") or not all(
      hasattr(trainer, name) for name in state
  ):
    return None
  return state


# Tunix's prepared diffusion rollouts (open PR stack #1745-#1749):
# `RolloutOutput.diffusion_batch`, a `DiffusionTokenBatch` that Tunix's GRPO
# scores with a `DiffusionLogitsFn`. google-tunix 0.1.7 and Tunix main have
# none; there the trace rides beside Tunix's output (`rl.cluster`).
ROLLOUT_HAS_DIFFUSION_BATCH = (
    "diffusion_batch" in inspect.signature(RolloutOutput).parameters
)
