# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one place that absorbs Tunix API moves between releases.

tunix_bd pins `google-tunix==0.1.7`. Tunix main has since moved config
classes to `tunix.common.configs` (re-exported from the old modules) and
renamed `RLCluster` to `RLEngine` (keeping an alias). Every other tunix_bd
module imports these names from here, and the Tunix behaviours tunix_bd
relies on are stated here, so a Tunix upgrade is a change to this file
alone.
"""

# pylint: disable=g-import-not-at-top

import sys

from tunix.generate import sampler as _sampler
from tunix.rl import rl_cluster as _rl_cluster
from tunix.rl.grpo import grpo_learner as _grpo_learner
from tunix.rl.rollout import base_rollout as _base_rollout
from tunix.sft import progress_bar as _progress_bar
from tunix.sft import peft_trainer as _peft_trainer

try:  # Tunix main.
  from tunix.common import configs as _configs

  TrainingConfig = _configs.TrainingConfig
  CacheConfig = _configs.CacheConfig
except ImportError:  # google-tunix 0.1.7.
  TrainingConfig = _peft_trainer.TrainingConfig
  CacheConfig = _sampler.CacheConfig

PeftTrainer = _peft_trainer.PeftTrainer
Sampler = _sampler.Sampler

# RL. Tunix main renamed `RLCluster` to `RLEngine` and keeps the old name as
# an alias; the plug points below exist in 0.1.7 and main alike.
RLCluster = getattr(_rl_cluster, "RLCluster", None) or _rl_cluster.RLEngine
ClusterConfig = _rl_cluster.ClusterConfig
RLTrainingConfig = _rl_cluster.RLTrainingConfig
Role = _rl_cluster.Role
Mode = _rl_cluster.Mode
GRPOConfig = _grpo_learner.GRPOConfig
GRPOLearner = _grpo_learner.GRPOLearner
BaseRollout = _base_rollout.BaseRollout
RolloutConfig = _base_rollout.RolloutConfig
RolloutOutput = _base_rollout.RolloutOutput

# Gradient accumulation. google-tunix 0.1.7's `PeftTrainer` wraps the
# optimizer in `optax.MultiSteps(optimizer, gradient_accumulation_steps)`
# (`tunix/sft/peft_trainer.py`), which applies the MEAN of the k micro-batch
# gradients. `tunix_bd.denominators` relies on this: it scales each
# micro-batch loss by k so that the mean is the global batch's gradient.
# A Tunix that sums instead must set this to False (and
# `sft_accumulation_test` checks the update either way).
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


def tunix_progress_bar_visible() -> bool:
  """Whether `PeftTrainer`'s tqdm bar draws (its own test, in 0.1.7)."""
  in_ipython = getattr(_progress_bar, "_is_in_ipython", lambda: False)
  return in_ipython() or sys.stderr.isatty()
