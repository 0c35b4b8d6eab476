# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""One denoising step of one block, as a unit (docs/design.md "Denoising step").

The compiled loop (`decode_loop`) only fetches logits and moves from block
to block; `denoise_step` samples, commits and records log-probs.
`CommitParams` holds the rule and its parameters as traced scalars, so one
compiled program serves every rule and threshold.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import scoring
from tunix_bd.generate import commit_rules


class CommitParams(NamedTuple):
  """The commit rule and sampling temperature, as traced scalars.

  Attributes:
    rule: int32 index into `commit_rules.RULES`.
    parameters: each rule parameter (`commit_rules.PARAMETERS`) by name,
      an int32 or float32 scalar.
    temperature: float32 sampling temperature; 0 is greedy.
  """

  rule: jax.Array
  parameters: dict[str, jax.Array]
  temperature: jax.Array

  @classmethod
  def create(
      cls, settings: commit_rules.CommitSettings, temperature: float
  ) -> CommitParams:
    """NumPy scalars of validated settings (e.g. a `DenoiseConfig`)."""
    return cls(
        rule=np.int32(commit_rules.RULES.index(settings.rule)),
        parameters={
            name: (np.int32 if kind is int else np.float32)(
                getattr(settings, name)
            )
            for name, (kind, _, _) in commit_rules.PARAMETERS.items()
        },
        temperature=np.float32(temperature),
    )


class StepOutput(NamedTuple):
  """A block after one step; each `[batch, block]`.

  Attributes:
    tokens: int32 the block's tokens, committed ones written.
    steps: int32 commit step per position, -1 if not yet committed.
    logp: float32 log-prob of each committed token at its step.
    commit: bool the positions this step committed.
  """

  tokens: jax.Array
  steps: jax.Array
  logp: jax.Array
  commit: jax.Array


def step_keys(keys: jax.Array, logical_block: jax.Array, step: jax.Array):
  """Per-row sampling keys of (seed, logical block, step).

  A row's stream depends on nothing else, so its samples never depend on
  which rows share its batch (`core.rng`). `keys` are `[batch]` typed keys
  (`rng.keys`), `logical_block` int `[batch]`, `step` an int scalar.
  """
  return jax.vmap(
      lambda k, b: jax.random.fold_in(jax.random.fold_in(k, b), step)
  )(keys, logical_block)


def denoise_step(
    logits: jax.Array,
    tokens: jax.Array,
    steps: jax.Array,
    logp: jax.Array,
    eligible: jax.Array,
    params: CommitParams,
    keys: jax.Array,
    step: jax.Array,
) -> StepOutput:
  """One denoising step of a block.

  Args:
    logits: float32 `[batch, block, vocab]` target-aligned logits of the
      block's canvas (mask column at `MASKED_LOGIT`).
    tokens: int32 `[batch, block]` the canvas.
    steps: int32 `[batch, block]` commit step per position, -1 if open.
    logp: float32 `[batch, block]` recorded log-probs.
    eligible: bool `[batch, block]` positions that may commit (open
      completion positions of rows still decoding).
    keys: `[batch]` this step's per-row keys (`step_keys`).

  Returns:
    The block after the step; a row with an eligible position commits at
    least one.
  """
  greedy = params.temperature == 0
  # Greedy decoding samples nothing; its log-probs are at temperature 1.
  temperature = jnp.where(greedy, 1.0, params.temperature)
  log_probs = scoring.log_probs(logits, temperature)
  confidence = jnp.exp(jnp.max(log_probs, axis=-1))
  sampled = jax.lax.cond(
      greedy,
      lambda: jnp.argmax(logits, axis=-1).astype(jnp.int32),
      lambda: jax.vmap(jax.random.categorical)(keys, log_probs).astype(
          jnp.int32
      ),
  )
  sampled_logp = jnp.take_along_axis(log_probs, sampled[..., None], axis=-1)
  # A switch runs only the selected rule's computation.
  branches = [
      functools.partial(commit_rules.commit_mask, rule, **params.parameters)
      for rule in commit_rules.RULES
  ]
  commit = jax.lax.switch(params.rule, branches, confidence, eligible)
  return StepOutput(
      tokens=jnp.where(commit, sampled, tokens),
      steps=jnp.where(commit, step, steps),
      logp=jnp.where(commit, sampled_logp[..., 0], logp),
      commit=commit,
  )
