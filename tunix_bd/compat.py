# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one place that absorbs Tunix API moves between releases.

tunix_bd supports google-tunix 0.1.7 and Tunix main (0.1.8.dev). Between
them Tunix moved config classes to `tunix.common.configs` and `Role` /
`Mode` to `tunix.common.datatypes` (re-exported from the old modules),
renamed `RLCluster` to `RLEngine` (keeping an alias), made loss functions
and `rl.common.aggregate_loss` return `LossOutput` / `WeightedMetric`
instead of `(loss, aux)` tuples and scalars, and gave `GRPOConfig`
`use_rollout_logps` and a token-level `sampler_is` correction.

Tunix's Qwen3 and Qwen2 safetensors loaders
(`tunix.models.{qwen3,qwen2}.params.create_model_from_safe_tensors`) and
`ModelConfig` fields are the same in both, so `models.hf_checkpoint` calls
them directly.

Every other tunix_bd module takes Tunix's RL, SFT and distillation names
from here (`compat_test` checks the import graph; `tunix.models` may be
imported directly), the Tunix behaviours tunix_bd relies on are stated
here, every version check is here, and every private Tunix name tunix_bd
reaches is listed here with its owner's source pinned per version
(`PRIVATE_SURFACE`), so a Tunix upgrade is a change to this file alone.
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
from tunix.models.qwen3 import model as _qwen3_model
from tunix.perf.experimental import constants as _perf_constants
from tunix.rl import algo_core as _algo_core
from tunix.rl import common as _rl_common
from tunix.rl import function_registry as _function_registry
from tunix.rl import reshard as _reshard
from tunix.rl import rl_learner as _rl_learner
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

try:  # Tunix main: configs and enums in `tunix.common`, re-exported.
  from tunix.common import configs as _configs
  from tunix.common import datatypes as _datatypes

  TrainingConfig = _configs.TrainingConfig
  CacheConfig = _configs.CacheConfig
  RolloutConfig = _configs.RolloutConfig
  RLTrainingConfig = _configs.RLTrainingConfig
  ClusterConfig = _configs.ClusterConfig
  Role = _datatypes.Role
  Mode = _datatypes.Mode
except ImportError:  # google-tunix 0.1.7.
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
# pylint: disable-next=protected-access
_DEFAULT_SFT_LOSS_FN = _peft_trainer._default_loss_fn

# RL. Tunix main renamed `RLCluster` to `RLEngine` and keeps the old name as
# an alias; the plug points below exist in 0.1.7 and main alike.
RLCluster = getattr(_rl_cluster, "RLCluster", None) or _rl_cluster.RLEngine
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
reshard_model_to_mesh = _reshard.reshard_model_to_mesh
put_params_on_memory_kind = _rl_utils.put_params_on_memory_kind
is_sharing_weights = _rl_utils.is_sharing_weights

# Tunix's private surface: every non-public Tunix name tunix_bd reads,
# calls or overrides, by the Tunix class or function that defines it (the
# names `tunix_bd` subclasses reach: trainer steps and buffers, the RL
# learner's batch sizes and reward call, the cluster's role meshes). Tunix
# may change any of them in any release, so each owner's source is pinned
# per supported version in `PRIVATE_SURFACE_SHA256`, and `compat_test`
# fails on a new Tunix, or a changed owner, naming the owner to re-read.
# `GRPOLearner._generate_and_compute_advantage` is the one method tunix_bd
# replaces (`rl/learner.py` ports it), so it is pinned by its own source.
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
}

# sha256 of `inspect.getsource` of each `PRIVATE_SURFACE` owner, per
# supported google-tunix version. A new Tunix, or a changed digest, is a
# decision: re-read the owner, port what changed, then add its digest.
_MAIN_SURFACE_SHA256 = {
    "PeftTrainer": (
        "2c0650ba64a7dfd97f071dd2adea28421f42987796791c80e83d9b6c82e66560"
    ),
    "RLLearner": (
        "cbab907d94af13e91ae902ead7bce0a9b59e4738971f5b43292f64308154dbeb"
    ),
    "RLCluster": (  # `RLEngine`, of which `RLCluster` is an alias.
        "3df07294ca137fd2a59ab7beb0e40e5b6d031ed11936db07e31040e104027dbe"
    ),
    "BaseStrategy": (
        "f814c1305908be59120b2232fc0063bc0a7ea2dad34dc768709023f9ad0f4e16"
    ),
    "GRPOLearner._generate_and_compute_advantage": (
        "a0acb61efdb36d0b87a93faa3e6f1ee6e9da87a647c580c05b54f0aae4094f6b"
    ),
    "peft_trainer._default_loss_fn": (
        "3323f0d1d953da36fe057e949f0700603d5c5e24e7b4977949511d4f66893849"
    ),
    "progress_bar._is_in_ipython": (
        "f5ebc8ff01a23052a5c9372a07836044a595cd35b6a060c792f6a356bee62bf3"
    ),
}
PRIVATE_SURFACE_SHA256 = {
    "0.1.7": {
        "PeftTrainer": (
            "1b5d9c4879e1b5ff5844e5956a30b46be3a178e121ac1739885a67c8800d46ed"
        ),
        "RLLearner": (
            "ccaf8b6188e0e3579bb03fe150dc67f38afe7bd5d5e13883e66f9731d78227fb"
        ),
        "RLCluster": (
            "0ff7a0e5b7264873dddbc239316c8db2592b7b089aca932f3c87624f4cecbe69"
        ),
        "BaseStrategy": (
            "f814c1305908be59120b2232fc0063bc0a7ea2dad34dc768709023f9ad0f4e16"
        ),
        "GRPOLearner._generate_and_compute_advantage": (
            "c56268e58863fedb902bcc6e8041440569845c77bf9090c37c12bc8d68e3ab01"
        ),
        "peft_trainer._default_loss_fn": (
            "a04af624f5ef514b4a17ef1f6280f68493dad6e175252f73a77af21b82f78b38"
        ),
        "progress_bar._is_in_ipython": (
            "f5ebc8ff01a23052a5c9372a07836044a595cd35b6a060c792f6a356bee62bf3"
        ),
    },
    # Tunix main, and main with the diffusion SFT adapter (#1891), which
    # touches none of these.
    "0.1.8.dev20260821": _MAIN_SURFACE_SHA256,
    "0.1.8.dev20260822": _MAIN_SURFACE_SHA256,
}


def private_surface_owner(name: str) -> Any:
  """The Tunix class or function a `PRIVATE_SURFACE` key names."""
  owners = {
      "PeftTrainer": PeftTrainer,
      "RLLearner": _rl_learner.RLLearner,
      "RLCluster": RLCluster,
      "BaseStrategy": BaseStrategy,
      "GRPOLearner._generate_and_compute_advantage": (
          # pylint: disable-next=protected-access
          GRPOLearner._generate_and_compute_advantage
      ),
      # pylint: disable-next=protected-access
      "peft_trainer._default_loss_fn": _peft_trainer._default_loss_fn,
      # pylint: disable-next=protected-access
      "progress_bar._is_in_ipython": _progress_bar._is_in_ipython,
  }
  return owners[name]


# Tunix's own diffusion contract (`DiffusionTokenBatch`,
# `DiffusionBatchAdapter`, `DiffusionLogitsFn`, `compute_diffusion_logits`),
# on Tunix main; None on google-tunix 0.1.7, which keeps tunix_bd's own path.
try:
  from tunix import diffusion as tunix_diffusion
except ImportError:  # google-tunix 0.1.7.
  tunix_diffusion = None
HAS_DIFFUSION_CONTRACT = tunix_diffusion is not None

# Tunix's diffusion SFT adapter (`configure_diffusion_sft`,
# `diffusion_loss_fn`; Tunix PR #1891, on main after 2026-08-21); None on
# google-tunix 0.1.7 and on main before it.
try:
  from tunix.sft import diffusion as tunix_sft_diffusion
except ImportError:  # google-tunix 0.1.7, Tunix main before PR #1891.
  tunix_sft_diffusion = None
HAS_DIFFUSION_SFT = tunix_sft_diffusion is not None
DIFFUSION_SFT_NEEDS = (
    "Tunix's diffusion SFT adapter (tunix.sft.diffusion: Tunix main with PR"
    " #1891, 0.1.8.dev20260822 or later, or the first release after 0.1.7)"
)

# Tunix main's deferred-division metric; google-tunix 0.1.7 has none.
_WeightedMetric = getattr(_sft_utils, "WeightedMetric", None)
_LossOutput = getattr(_sft_utils, "LossOutput", None)

# Gradient accumulation. google-tunix 0.1.7's `PeftTrainer` wraps the
# optimizer in `optax.MultiSteps(optimizer, gradient_accumulation_steps)`
# (`tunix/sft/peft_trainer.py`), which applies the MEAN of the k micro-batch
# gradients; Tunix main's `GradientAccumulator` divides the summed gradients
# by the summed denominators, 1 per micro-batch for a loss that returns a
# scalar (as tunix_bd's do), so the mean again. `tunix_bd.core.denominators`
# relies on this: it scales each micro-batch loss by k so that the mean is
# the global batch's gradient. A Tunix that sums instead must set this to
# False (and `sft_accumulation_test` checks the update either way).
ACCUMULATION_AVERAGES_GRADIENTS = True

# RoPE. The base each decoder family's attention really rotates with, by
# `tunix_bd.core.families` name; None means `ModelConfig.rope_theta`. In
# google-tunix 0.1.7 and main (0.1.8.dev, 2026-08) Qwen3's and Llama 3's
# `Attention` call their module's `apply_rope` without the config's theta,
# so they rotate with its default, 1e6, whatever the config says; Qwen2
# passes `config.rope_theta`. `families` refuses any config whose theta
# differs from the one applied, and `families_test` probes every family
# (and a Hugging Face Llama checkpoint) to pin this table.
ROPE_THETA_APPLIED = {"qwen3": 1_000_000, "qwen2": None, "llama3": 1_000_000}

# Tunix Qwen3's RoPE, `(x [b, t, heads, head_dim], positions [b, t],
# head_dim)`, as its `Attention.block` calls it (default theta, see above).
# `core.splash_attention` replays that block around the Splash kernel; its
# tests hold it equal to `model(...)`, so a Tunix change to the block fails
# them.
qwen3_apply_rope = _qwen3_model.apply_rope


def final_hidden_states(
    model: Any,
    tokens: jax.Array,
    positions: jax.Array,
    cache: Any,
    attention_mask: jax.Array,
) -> tuple[jax.Array, Any]:
  """A Tunix decoder's forward up to its final norm, without its LM head.

  Tunix main's decoders return these states with `skip_lm_head=True`.
  google-tunix 0.1.7's Qwen3 and Qwen2 have no such flag but sow them
  (`output_hidden_states=True`) and still apply the head; its logits are
  unused, so XLA drops them from any jitted program (callers jit; an eager
  call pays for the head). Either way the call is `model(...)` itself, so
  wrappers of it (qwix's LoRA) stay in effect.

  Args:
    model: a Tunix decoder (Qwen3, Qwen2, Llama 3).
    tokens, positions, cache, attention_mask: as for `model(...)`.

  Returns:
    `(hidden, new_cache)`: `[batch, length, embed]` final-norm outputs in
    the model's compute dtype (what its head multiplies) and the cache as
    `model(...)` returns it.

  Raises:
    ValueError: for a model with neither flag (google-tunix 0.1.7's Llama
      3).
  """
  call = getattr(type(model), "_unquantized_type", type(model)).__call__
  parameters = inspect.signature(call).parameters
  if "skip_lm_head" in parameters:
    return model(tokens, positions, cache, attention_mask, skip_lm_head=True)
  if "output_hidden_states" not in parameters:
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


def reduce_metric(value: Any) -> Any:
  """A Tunix loss or aux value as the number 0.1.7 returned.

  Tunix main returns a `WeightedMetric` (sum and denominator, divided
  late); its `compute()` is 0.1.7's eager mean. Anything else is returned
  as it is.
  """
  if _WeightedMetric is not None and isinstance(value, _WeightedMetric):
    return value.compute()
  return value


def loss_and_aux(out: Any) -> tuple[jax.Array, dict[str, Any]]:
  """`(loss, aux)` of a Tunix loss function's return, on either version.

  Args:
    out: a `(loss, aux)` tuple (0.1.7), a `LossOutput` (main), or a bare
      loss.

  Returns:
    The scalar loss (differentiable as the loss the trainer optimizes) and
    the aux dict with every `WeightedMetric` reduced (`reduce_metric`).
  """
  if _LossOutput is not None and isinstance(out, _LossOutput):
    loss, aux = out.primary_loss, out.aux_metrics
  elif isinstance(out, tuple):
    loss, aux = out
  else:
    loss, aux = out, {}
  return reduce_metric(loss), {k: reduce_metric(v) for k, v in aux.items()}


def aggregate_loss(
    per_token_loss: jax.Array, mask: jax.Array, loss_agg_mode: str
) -> jax.Array:
  """Tunix's `rl.common.aggregate_loss` as a scalar, on either version.

  Args:
    per_token_loss: float `[batch, T]`.
    mask: `[batch, T]`, the tokens that count.
    loss_agg_mode: one of Tunix's modes (`rl.settings.LOSS_AGG_MODES`).
  """
  return jnp.asarray(
      reduce_metric(
          _rl_common.aggregate_loss(per_token_loss, mask, loss_agg_mode)
      )
  )


def reduced_aggregate_loss(
    per_token_loss: jax.Array, mask: jax.Array, loss_agg_mode: str
) -> jax.Array:
  """Tunix main's eager `reduced_loss_agg` (its `reduced_pg_loss` metric).

  Main's `aggregate_loss` divides `sequence-mean-token-mean` by the
  non-empty rows, this eager form by all rows; 0.1.7 has only the one
  `aggregate_loss`, which this then is. Arguments as `aggregate_loss`.
  """
  reduced = getattr(_rl_common, "reduced_loss_agg", None)
  if reduced is None:
    return aggregate_loss(per_token_loss, mask, loss_agg_mode)
  return reduced(per_token_loss, mask, loss_agg_mode)


def default_sft_loss(model, **batch) -> jax.Array:
  """The scalar of Tunix's default AR SFT loss (`PeftTrainer`'s own)."""
  out = _DEFAULT_SFT_LOSS_FN(model, **batch)
  return loss_and_aux(out)[0]


def grpo_config(**fields: Any) -> Any:
  """Tunix's `GRPOConfig`, old log-probs recomputed on the trainer.

  google-tunix 0.1.7's GRPO always recomputes the old policy's log-probs on
  the actor; Tunix main's defaults to the rollout's (`use_rollout_logps`),
  which a stock rollout returns only with `RolloutConfig.return_logprobs`
  (else `GRPOLearner` raises "old_per_token_logps is not available for
  off-policy RL"). Unless `fields` say otherwise, this sets main's flag to
  0.1.7's behaviour, so one config means one algorithm on both.

  Raises:
    ValueError: as `GRPOConfig`, or for `use_rollout_logps` / `sampler_is`
      on a Tunix without them.
  """
  names = {f.name for f in dataclasses.fields(GRPOConfig)}
  if "use_rollout_logps" in names:
    fields.setdefault("use_rollout_logps", False)
  for name in ("use_rollout_logps", "sampler_is", "sampler_is_threshold"):
    if name in fields and name not in names:
      raise ValueError(
          f"grpo.{name} needs a Tunix with it (main); google-tunix"
          f" {TUNIX_VERSION} has none."
      )
  # google-tunix 0.1.7's `GRPOConfig` has no `epsilon_high` / `epsilon_c`
  # fields, but its loss reads them by `getattr`: set on the instance.
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
  high = config.epsilon_high if hasattr(config, "epsilon_high") else epsilon
  return epsilon, high, getattr(config, "epsilon_c", None)


def grpo_old_logps_source(config: Any) -> tuple[bool, str | None, float]:
  """How a `GRPOConfig` sources old log-probs, on either version.

  Returns:
    `(use_rollout_logps, sampler_is, sampler_is_threshold)`: Tunix main's
    fields; google-tunix 0.1.7 has none and reads as `(False, None, 2.0)`
    (recompute on the trainer, no sampler correction). Under
    `sampler_is="token"` the trainer's log-probs are the old ones and the
    loss is weighted per token by `min(exp(trainer - sampler),
    sampler_is_threshold)`.
  """
  return (
      bool(getattr(config, "use_rollout_logps", False)),
      getattr(config, "sampler_is", None),
      float(getattr(config, "sampler_is_threshold", 2.0)),
  )


# Tunix's GRPO learner's perf spans (the same in 0.1.7 and main): the name
# of each `perf` span and the `perf_v2` name it pairs with.
_PERF_V2_NAMES = {
    "refer_inference": _perf_constants.REFERENCE_INFERENCE,
    "old_actor_inference": _perf_constants.OLD_ACTOR_INFERENCE,
    "advantage_computation": _perf_constants.ADVANTAGE_COMPUTATION,
}


@contextlib.contextmanager
def grpo_perf_span(
    cluster: Any, name: str, *, role: Any = None
) -> Iterator[Callable[[Any], None]]:
  """One of Tunix's GRPO phase spans, on both of its perf tracers.

  As `GRPOLearner._generate_and_compute_advantage` writes them: `perf`'s
  span `name` and `perf_v2`'s paired span, on `role`'s devices (None: no
  devices), tagged with the global step.

  Args:
    cluster: the learner's `RLCluster`.
    name: `"refer_inference"`, `"old_actor_inference"` or
      `"advantage_computation"`.
    role: the `Role` whose mesh runs the phase, or None.

  Yields:
    `end(outputs)`: marks the phase's device work done on `outputs` (a
    pytree of arrays), as Tunix's `device_end` / `async_end`.
  """
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


# The train step's arguments in google-tunix 0.1.7, donated but the batch.
_TRAIN_STEP_LEADING_STATE = ("model", "optimizer")


def train_step_state_args(trainer: Any) -> tuple[str, ...] | None:
  """The trainer attributes Tunix's train step takes before `inputs`.

  Returns:
    `("model", "optimizer")` on google-tunix 0.1.7, `("model", "optimizer",
    "grad_accumulator")` on Tunix main; None for a step of another shape.
  """
  if not hasattr(trainer, "_jitted_train_step_fn"):
    return None
  params = tuple(inspect.signature(trainer.create_train_step_fn()).parameters)
  if "inputs" not in params:
    return None
  state = params[: params.index("inputs")]
  if state[
      : len(_TRAIN_STEP_LEADING_STATE)
  ] != _TRAIN_STEP_LEADING_STATE or not all(
      hasattr(trainer, name) for name in state
  ):
    return None
  return state


# Tunix's prepared diffusion rollouts (the open PR stack #1745-#1749, wheel
# 0.1.8.dev20260723): `RolloutOutput.diffusion_batch`, a
# `DiffusionTokenBatch` that Tunix's GRPO scores with a `DiffusionLogitsFn`
# (`tunix.rl.diffusion.compute_diffusion_per_token_logps`). google-tunix
# 0.1.7 and Tunix main have no such field; there the trace rides beside
# Tunix's output alone (`rl.cluster`).
ROLLOUT_HAS_DIFFUSION_BATCH = (
    "diffusion_batch" in inspect.signature(RolloutOutput).parameters
)
