# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The GRPO recipe's config sections as frozen, checked dataclasses.

`grpo` and `reward` are GRPO's own; `GrpoConfig` names every section's
class. `check_together` checks what spans sections.
"""

from __future__ import annotations

import dataclasses

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import sections
from tunix_bd.rl import rewards
from tunix_bd.training import options

# Tunix 0.1.7's names: `GRPOConfig.loss_algo`, the `loss_agg_mode`s of
# `rl.common.aggregate_loss` and the `kl_loss_mode`s of
# `rl.common.compute_kl_divergence` (settings_test pins them to Tunix).
LOSS_ALGOS = ("grpo", "gspo-token")
LOSS_AGG_MODES = (
    "token-mean",
    "sequence-mean-token-mean",
    "sequence-mean-token-scale",
    "seq-mean-token-sum",
    "sequence-mean-token-sum-norm",
)
KL_LOSS_MODES = ("kl", "mse_kl", "low_var_kl")
# `grpo.learner` (`GrpoSettings.learner`).
TUNIX_BD_LEARNER = "tunix_bd"
TUNIX_LEARNER = "tunix"
LEARNERS = (TUNIX_BD_LEARNER, TUNIX_LEARNER)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GrpoSettings:
  """The GRPO algorithm (Tunix's `GRPOConfig` fields of the same names).

  Attributes:
    num_generations: G, samples per prompt, >= 2.
    num_iterations: optimizer passes over each batch of rollouts, >= 1.
    beta: weight of the KL penalty against the reference, >= 0.
    epsilon: the ratio clip (1 - epsilon, 1 + epsilon_high), in (0, 1).
    epsilon_high: the upper clip, >= epsilon; None: `epsilon`.
    loss_algo: `grpo` or `gspo-token` (token-level GSPO).
    loss_agg_mode: one of `LOSS_AGG_MODES`.
    kl_loss_mode: the KL estimator, one of `KL_LOSS_MODES`.
    verify_replay_every_n_steps: every this many global steps, log the
      largest difference of the rollout's log-probs from their replay
      (`diffusion/rollout_anchor_logp_abs_max`, ~1e-6 when exact); 0: only
      when old log-probs are needed.
    learner: `tunix_bd` (`DiffusionGRPOLearner`) or `tunix`, Tunix's own
      `GRPOLearner` on prepared diffusion batches, on a Tunix that has them
      (docs/design.md, "A model call brought as a Tunix
      `DiffusionLogitsFn`").
  """

  num_generations: int = 8
  num_iterations: int = 1
  beta: float = 0.03
  epsilon: float = 0.2
  epsilon_high: float | None = None
  loss_algo: str = "grpo"
  loss_agg_mode: str = "sequence-mean-token-mean"
  kl_loss_mode: str = "low_var_kl"
  # A check's cadence: it logs, never changes a step.
  verify_replay_every_n_steps: int = config_utils.resumable(default=10)
  learner: str = TUNIX_BD_LEARNER

  def __post_init__(self):
    for key, allowed in (
        ("learner", LEARNERS),
        ("loss_algo", LOSS_ALGOS),
        ("loss_agg_mode", LOSS_AGG_MODES),
        ("kl_loss_mode", KL_LOSS_MODES),
    ):
      if (value := getattr(self, key)) not in allowed:
        raise ValueError(f"grpo.{key} must be one of {allowed}, got {value!r}.")
    if self.learner == TUNIX_LEARNER and not compat.ROLLOUT_HAS_DIFFUSION_BATCH:
      raise ValueError(
          f"grpo.learner={TUNIX_LEARNER!r} needs a Tunix whose rollouts carry"
          " prepared diffusion batches (RolloutOutput.diffusion_batch, the PR"
          f" stack #1745-#1749); google-tunix {compat.TUNIX_VERSION} has none."
          f" Use grpo.learner={TUNIX_BD_LEARNER!r}."
      )
    for key, minimum in (
        ("num_generations", 2),
        ("verify_replay_every_n_steps", 0),
        ("num_iterations", 1),
    ):
      config_utils.check_int(f"grpo.{key}", getattr(self, key), minimum)
    config_utils.check_number("grpo.beta", self.beta, 0)
    config_utils.check_number("grpo.epsilon", self.epsilon, 0, strict=True)
    if self.epsilon >= 1:
      raise ValueError(
          "grpo.epsilon must be < 1 (the lower clip is 1 - epsilon), got"
          f" {self.epsilon!r}."
      )
    if self.epsilon_high is not None:
      config_utils.check_number(
          "grpo.epsilon_high", self.epsilon_high, 0, strict=True
      )
      if self.epsilon_high < self.epsilon:
        raise ValueError(
            f"grpo.epsilon_high={self.epsilon_high!r} must be >="
            f" grpo.epsilon={self.epsilon!r}."
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class RewardSettings:
  """The reward: the sum of the terms below (see `rewards`).

  Attributes:
    exact: weight of exact match against the data's `answer`.
    partial: weight of the answer's fraction of characters right.
    speed_weight: weight of the forwards-per-token penalty; 0: off.
    speed_cap: forwards per token are clipped to this before weighting.
    speed_gate: "" penalises every row's forwards per token; "exact" gives
      correct rows a bonus for speed instead, and others nothing.
    functions: user reward functions, `"package.module:function"` or
      dotted paths, resolved here.
  """

  exact: float = 1.0
  partial: float = 0.5
  speed_weight: float = 0.0
  speed_cap: float = 2.0
  speed_gate: str = ""
  functions: tuple[str, ...] = ()

  def __post_init__(self):
    for key in ("exact", "partial", "speed_weight"):
      config_utils.check_number(f"reward.{key}", getattr(self, key), 0)
    config_utils.check_number(
        "reward.speed_cap", self.speed_cap, 0, strict=True
    )
    if self.speed_gate not in rewards.SPEED_GATES:
      raise ValueError(
          f"reward.speed_gate must be one of {rewards.SPEED_GATES}, got"
          f" {self.speed_gate!r}."
      )
    if isinstance(self.functions, str):
      raise ValueError(
          "reward.functions must be a list of import paths, got the string"
          f" {self.functions!r}."
      )
    object.__setattr__(self, "functions", tuple(self.functions))
    rewards.reward_fns(self)  # Resolves every function; names must differ.


@dataclasses.dataclass(frozen=True)
class GrpoConfig:
  """The `grpo` recipe's typed sections (`run.stage.Stage`), in check order."""

  model: sections.GrpoModel
  data: data_settings.RlData
  rollout: generate_settings.GrpoRollout
  grpo: GrpoSettings
  reward: RewardSettings
  train: options.RlTrain
  eval: options.HeldOutEval
  export: sections.ExportSettings
  mesh: mesh_lib.RoleMeshSettings

  @property
  def description(self) -> str:
    """The run's name in progress lines and the report."""
    if self.grpo.learner == TUNIX_LEARNER:
      return f"GRPO ({self.grpo.loss_algo}, Tunix's GRPOLearner)"
    return f"GRPO ({self.grpo.loss_algo})"


def check_together(run: GrpoConfig) -> None:
  """What spans sections (the recipe's `validate` checks them once built)."""
  if run.grpo.learner == TUNIX_LEARNER and run.reward.speed_weight:
    raise ValueError(
        f"reward.speed_weight={run.reward.speed_weight} needs the forwards"
        f" per row, which grpo.learner={TUNIX_LEARNER!r} (Tunix's"
        " GRPOLearner) does not pass to reward functions; set it 0 or use"
        f" grpo.learner={TUNIX_BD_LEARNER!r}."
    )
