# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The trace of a denoising rollout: what replay needs to rescore it.

For every completion position the trace records the committed token, the
step of its block at which it was committed and its log-probability at that
step. Block b of row r holds the logical positions `[b * S, (b + 1) * S)`
(S = `bd.block_size`); completion position j of row r has logical position
`prompt_lengths[r] + j`. Steps are numbered within each block from 0, and
a block containing prompt positions counts only its completion positions.

Canvas rule: before step s, block b's canvas holds its prompt positions and
exactly its completion positions with `0 <= action_step < s`; the others
are the mask token. Earlier blocks are clean (all committed). Positions of
blocks after the row's stop block were never generated: `action_step == -1`,
`action_logp == 0`, and `tokens` holds the pad id there.
"""

from __future__ import annotations

from typing import Any

import flax
import numpy as np
from tunix_bd.core import bd_config as bd_config_lib


def _array(name: str, value: Any, ndim: int, kind: str) -> np.ndarray:
  value = np.asarray(value)
  if value.ndim != ndim:
    raise ValueError(f"trace.{name} must have rank {ndim}, got {value.shape}.")
  if kind == "int" and not np.issubdtype(value.dtype, np.integer):
    raise ValueError(f"trace.{name} must be integer, got {value.dtype}.")
  if kind == "float" and not np.issubdtype(value.dtype, np.floating):
    raise ValueError(f"trace.{name} must be float, got {value.dtype}.")
  return value


@flax.struct.dataclass
class Trace:
  """A recorded denoising rollout (see the module docstring for the rule).

  Attributes:
    prompt_tokens: int32 `[batch, prompt_len]` prompts in logical order,
      right-padded.
    prompt_lengths: int32 `[batch]` real prompt lengths, >= 1.
    tokens: int32 `[batch, max_new_tokens]` completion tokens in logical
      order; the pad id where never generated.
    action_step: int32 `[batch, max_new_tokens]` the step within its block
      (from 0) at which each position was committed; -1 if never generated.
    action_logp: float32 `[batch, max_new_tokens]` log-prob of the committed
      token under the step's distribution: the temperature-scaled
      log-softmax over the vocabulary without the mask token; 0 where never
      generated.
    temperature: the temperature of that distribution: the sampling
      temperature, or 1.0 for greedy decoding (which samples nothing).
    bd: the block-diffusion settings the rollout used.
  """

  prompt_tokens: Any
  prompt_lengths: Any
  tokens: Any
  action_step: Any
  action_logp: Any
  temperature: float = flax.struct.field(pytree_node=False, default=1.0)
  bd: bd_config_lib.BlockDiffusionConfig | None = flax.struct.field(
      pytree_node=False, default=None
  )

  def blocks(self) -> np.ndarray:
    """int `[batch, max_new_tokens]` logical block of each completion slot."""
    lengths = np.asarray(self.prompt_lengths)[:, None]
    width = np.asarray(self.tokens).shape[1]
    return (lengths + np.arange(width)) // self.bd.block_size

  def validate(self) -> Trace:
    """Checks the trace's shapes and its step rules (fail closed).

    Returns:
      The trace itself.

    Raises:
      ValueError: naming the field, for wrong ranks, dtypes or shapes, a
        prompt length outside [1, prompt_len], a bad temperature or `bd`,
        an `action_step` outside [-1, block_size), never-generated positions
        that are not whole trailing blocks, a block whose steps are not
        0..k-1 each committing at least one position, a committed mask
        token, or a log-prob that is not finite and <= 0.
    """
    if not isinstance(self.bd, bd_config_lib.BlockDiffusionConfig):
      raise ValueError(
          f"trace.bd must be a BlockDiffusionConfig, got {self.bd!r}."
      )
    temperature = self.temperature
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float, np.integer, np.floating))
        or not 0.0 < temperature < float("inf")
    ):
      raise ValueError(
          f"trace.temperature must be a finite number > 0, got {temperature!r}."
      )
    prompt = _array("prompt_tokens", self.prompt_tokens, 2, "int")
    lengths = _array("prompt_lengths", self.prompt_lengths, 1, "int")
    tokens = _array("tokens", self.tokens, 2, "int")
    steps = _array("action_step", self.action_step, 2, "int")
    logp = _array("action_logp", self.action_logp, 2, "float")
    batch, prompt_len = prompt.shape
    if lengths.shape != (batch,) or tokens.shape[0] != batch:
      raise ValueError(
          f"trace batch sizes differ: prompt_tokens {prompt.shape},"
          f" prompt_lengths {lengths.shape}, tokens {tokens.shape}."
      )
    for name, value in (("action_step", steps), ("action_logp", logp)):
      if value.shape != tokens.shape:
        raise ValueError(
            f"trace.{name} must have the shape of tokens {tokens.shape}, got"
            f" {value.shape}."
        )
    if ((lengths < 1) | (lengths > prompt_len)).any():
      raise ValueError(
          f"trace.prompt_lengths must be in [1, {prompt_len}], got"
          f" {lengths.tolist()}."
      )
    size = self.bd.block_size
    if ((steps < -1) | (steps >= size)).any():
      raise ValueError(
          f"trace.action_step must be in [-1, {size}), got values"
          f" {sorted(set(steps[(steps < -1) | (steps >= size)].tolist()))}."
      )
    generated = steps >= 0
    if (tokens[generated] == self.bd.mask_token_id).any():
      raise ValueError("trace.tokens commits the mask token.")
    gen_logp = logp[generated]
    if not (np.isfinite(gen_logp) & (gen_logp <= 0.0)).all():
      raise ValueError("trace.action_logp must be finite and <= 0.")
    # Per (row, block relative to the row's first): how many positions,
    # how many generated, and which steps were used.
    blocks = self.blocks()
    blocks = blocks - blocks[:, :1]
    rows = np.broadcast_to(np.arange(batch)[:, None], blocks.shape)
    num_blocks = int(blocks.max()) + 1
    total = np.zeros((batch, num_blocks), np.int64)
    done = np.zeros_like(total)
    np.add.at(total, (rows, blocks), 1)
    np.add.at(done, (rows, blocks), generated)
    if ((done > 0) & (done < total)).any():
      row, block = np.argwhere((done > 0) & (done < total))[0]
      raise ValueError(
          f"trace.action_step of row {row}: completion block {block} is"
          " partly generated; a row commits whole blocks."
      )
    whole = done > 0
    if (whole[:, 1:] & ~whole[:, :-1]).any():
      row, block = np.argwhere(whole[:, 1:] & ~whole[:, :-1])[0]
      raise ValueError(
          f"trace.action_step of row {row}: completion block {block + 1} is"
          " generated after a block that was not; -1 must be a tail."
      )
    used = np.zeros((batch, num_blocks, size), bool)
    used[rows[generated], blocks[generated], steps[generated]] = True
    # Steps 0..k-1 each commit at least one position: the used steps form a
    # prefix of 0, 1, 2, ...
    if (used[:, :, 1:] & ~used[:, :, :-1]).any():
      row, block, _ = np.argwhere(used[:, :, 1:] & ~used[:, :, :-1])[0]
      raise ValueError(
          f"trace.action_step of row {row}, completion block {block}: steps"
          f" {np.flatnonzero(used[row, block]).tolist()} are not 0..k-1"
          " (every step commits at least one position)."
      )
    return self
