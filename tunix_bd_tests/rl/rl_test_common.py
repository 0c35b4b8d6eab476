# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A tiny block-diffusion policy wired into Tunix's RL stack, for RL tests.

Also `log_rewards_like_tunix`: rewards in `metrics.jsonl` as Tunix logs them.
"""

from __future__ import annotations

import functools

import numpy as np
import optax
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.sft import metrics_logger

from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.data import tasks
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import mask_token
from tunix_bd.rl import wiring
from tunix_bd.training import options
from tunix_bd_tests import test_common

Mode = rl_cluster_lib.Mode
MAX_NEW_TOKENS = 8
MAX_PROMPT_LENGTH = 32


@functools.cache
def tokenizer():
  return tokenizer_lib.build_char_tokenizer()


@functools.cache
def bd() -> bd_config.BlockDiffusionConfig:
  mask_id = mask_token.resolve_reserved_mask_id(
      tokenizer(), tokenizer_lib.MASK_TOKEN, vocab_size=tokenizer_lib.VOCAB_SIZE
  )
  return bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=mask_id)


def model(seed: int = 0):
  return test_common.tiny_qwen3(vocab_size=tokenizer_lib.VOCAB_SIZE, seed=seed)


def dataset(num: int, batch: int, split: str = "train") -> list[dict]:
  """Items of `batch` rendered prompts with their answers (Tunix's input)."""
  tok = tokenizer()
  mix = tasks.TaskMix(tasks=("sort", "reverse"), min_len=1, max_len=3)
  examples = mix.examples(split, num)
  prompts = np.asarray([
      tok.apply_chat_template(
          e.messages()[:-1], add_generation_prompt=True, tokenize=False
      )
      for e in examples
  ])
  answers = np.asarray([e.answer for e in examples])
  return [
      dict(prompts=prompts[i : i + batch], answer=answers[i : i + batch])
      for i in range(0, num, batch)
  ]


def char_reward(prompts, completions, answer, **kwargs):
  """Exact match plus half the fraction of matching characters."""
  del prompts, kwargs
  return [
      float(c == a)
      + 0.5 * sum(x == y for x, y in zip(c, a)) / max(len(a), len(c), 1)
      for c, a in zip(completions, answer)
  ]


def cluster(
    *,
    actor=None,
    reference="same",
    checkpoint_dir: str | None = None,
    max_steps: int = 3,
    learning_rate: float = 1e-3,
    stop_ids=None,
    threshold: float = 0.5,
    temperature: float = 1.0,
    use_cache: bool = True,
    engine_kwargs=None,
    **training,
):
  """A `DiffusionRLCluster` of the tiny policy on one shared mesh.

  Args:
    actor: the policy (default: `model(0)`).
    reference: "same" (a copy of the actor's weights), a model, or None.
    checkpoint_dir: Tunix's checkpoint root, or None.
    max_steps, learning_rate: the actor's training.
    stop_ids: the rollout's stop ids (default: the EOS).
    threshold, temperature, use_cache: the commit threshold, TRAIN
      temperature and cache of the rollout's `decode`.
    engine_kwargs: overrides of `wiring.build_cluster` arguments.
    **training: further `RLTrainingConfig` fields.
  """
  actor = model(0) if actor is None else actor
  if isinstance(reference, str):
    reference = model(0)
  mesh = mesh_lib.from_section(dict(fsdp=-1, tp=1))
  training_config = rl_cluster_lib.RLTrainingConfig(
      actor_optimizer=optax.adamw(learning_rate),
      eval_every_n_steps=1000,
      max_steps=max_steps,
      checkpoint_root_directory=checkpoint_dir,
      **training,
  )
  kwargs = dict(
      actor=actor,
      reference=reference,
      tokenizer=tokenizer(),
      bd=bd(),
      decode=denoise.DenoiseConfig(
          max_new_tokens=MAX_NEW_TOKENS,
          max_prompt_length=MAX_PROMPT_LENGTH,
          temperature=temperature,
          threshold=threshold,
          use_cache=use_cache,
          stop_ids=stop_ids or (tokenizer().eos_token_id,),
          pad_id=tokenizer().pad_token_id,
      ),
      training_config=training_config,
      rollout_config=wiring.rollout_configs(
          generate_settings.GrpoRollout(
              max_new_tokens=MAX_NEW_TOKENS,
              max_prompt_length=MAX_PROMPT_LENGTH,
              temperature=temperature,
          )
      ),
      role_to_mesh=wiring.role_to_mesh(mesh),
  )
  kwargs.update(engine_kwargs or {})
  return wiring.build_cluster(**kwargs)


def log_rewards_like_tunix(workdir: str, steps) -> None:
  """Rewards logged through Tunix's MetricsLogger as `RLCluster` does.

  `RLCluster._log_metrics` splits `rewards/sum` into prefix `rewards` and
  name `sum` and logs them in mode `train`; both the actor trainer's and the
  cluster's loggers may write one JSONL, so step 1 is logged twice.
  """
  config = options.training_config(options.Train(), workdir, "grpo")
  logger = metrics_logger.MetricsLogger(config.metrics_logging_options)
  rng = np.random.default_rng(1)
  for step in steps:
    exact = min(1.0, 0.5 + step / 100) * rng.uniform(0.9, 1.0)
    partial = 0.5 * min(1.0, 0.7 + step / 200)
    for name, value in (
        ("sum", exact + partial),
        ("mean", (exact + partial) / 2),
        ("max", 1.5),
        ("exact_match", exact),
        ("partial_credit", partial),
        ("score/mean", exact + partial),
    ):
      logger.log("rewards", name, value, "train", step)
  logger.log("rewards", "sum", 99.0, "eval", 1)
  logger.close()
