# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The trace of a denoising rollout: the data contract of replay, RL and OPD.

Per completion slot: the committed token, its `action_step` and its
`action_logp`; `bd` and `temperature` once, read by every consumer from the
trace. The rules are docs/design.md "Trace" and "Logical positions";
`Trace.validate` checks them.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import scoring


def _array(name: str, value: Any, ndim: int, integer: bool) -> Any:
  if not isinstance(value, jax.Array):
    value = np.asarray(value)
  if value.ndim != ndim:
    raise ValueError(
        f"trace.{name} must have rank {ndim}, got shape {value.shape}."
    )
  if integer != bool(jnp.issubdtype(value.dtype, jnp.integer)):
    kind = "an integer" if integer else "a float"
    raise ValueError(f"trace.{name} must be {kind} array, got {value.dtype}.")
  return value


def completion_blocks(prompt_lengths: Any, width: int, block_size: int) -> Any:
  """int `[batch, width]` completion block of each slot (row's first = 0)."""
  xp = jnp if isinstance(prompt_lengths, jax.Array) else np
  blocks = (prompt_lengths[:, None] + xp.arange(width)) // block_size
  return blocks - blocks[:, :1]


@flax.struct.dataclass
class Trace:
  """A recorded denoising rollout (docs/design.md "Trace").

  Attributes:
    prompt_tokens: int32 `[batch, prompt_len]` prompts in logical order,
      right-padded.
    prompt_lengths: int32 `[batch]` real prompt lengths, >= 1.
    tokens: int32 `[batch, max_new_tokens]` completion tokens in logical
      order; the pad id where never generated.
    action_step: int32 `[batch, max_new_tokens]` the step within its block
      (from 0) at which each position was committed; -1 if never generated.
    action_logp: float32 `[batch, max_new_tokens]` log-prob of the committed
      token under the step's distribution, `scoring.log_probs` at
      `temperature`; 0 where never generated.
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

  def validate(
      self, *, vocab_size: int | None = None, stop_ids: Sequence[int] = ()
  ) -> Trace:
    """The trace, checked against its rules (fail closed); the one validator.

    Static checks (types, ranks, dtypes, shapes, `bd`, `temperature`)
    always run; value checks only on concrete arrays (not under `jit`),
    with generated tokens in [0, `vocab_size`) if given, and with `stop_ids`
    every row generated exactly up to the block of its first generated stop
    token, or every block (the stopping rule of `tunix_bd.core.eos`).
    """
    bd = self.bd
    if not isinstance(bd, bd_config_lib.BlockDiffusionConfig):
      raise ValueError(
          f"trace.bd must be a BlockDiffusionConfig, got {type(bd).__name__}."
      )
    scoring.check_temperature(self.temperature, "trace.temperature")
    prompt = _array("prompt_tokens", self.prompt_tokens, 2, True)
    lengths = _array("prompt_lengths", self.prompt_lengths, 1, True)
    tokens = _array("tokens", self.tokens, 2, True)
    steps = _array("action_step", self.action_step, 2, True)
    logp = _array("action_logp", self.action_logp, 2, False)
    batch, prompt_len = prompt.shape
    if prompt_len == 0:
      raise ValueError("trace.prompt_tokens is empty; a trace needs a prompt.")
    if lengths.shape != (batch,):
      raise ValueError(
          f"trace.prompt_lengths must have shape ({batch},), got"
          f" {lengths.shape}."
      )
    if tokens.shape[0] != batch or tokens.shape[1] == 0:
      raise ValueError(
          f"trace.tokens must have shape [{batch}, completion_len >= 1], got"
          f" {tokens.shape}."
      )
    for name, value in (("action_step", steps), ("action_logp", logp)):
      if value.shape != tokens.shape:
        raise ValueError(
            f"trace.{name} must have shape {tokens.shape} (that of tokens),"
            f" got {value.shape}."
        )
    arrays = (lengths, tokens, steps, logp)
    if any(isinstance(x, jax.core.Tracer) for x in arrays):
      return self
    lengths, tokens, steps, logp = (np.asarray(x) for x in arrays)
    if bd.alignment == bd_config_lib.SHIFTED and (lengths < 1).any():
      # Logical position 0 has no predicting logit: it must be prompt.
      raise ValueError(
          f"trace.prompt_lengths: alignment={bd_config_lib.SHIFTED!r} needs"
          " logical position 0 to be prompt context, but rows"
          f" {np.flatnonzero(lengths < 1).tolist()} have an empty prompt."
      )
    if ((lengths < 1) | (lengths > prompt_len)).any():
      raise ValueError(
          f"trace.prompt_lengths must be in [1, {prompt_len}] (no empty"
          " prompt, at most the width of prompt_tokens), got"
          f" {lengths.tolist()}."
      )
    _check_steps(steps, lengths, bd.block_size)
    generated = steps >= 0
    if (tokens[generated] == bd.mask_token_id).any():
      raise ValueError(
          f"trace.tokens commits the mask token {bd.mask_token_id}, which is"
          " never sampled."
      )
    if vocab_size is not None:
      out = generated & ((tokens < 0) | (tokens >= vocab_size))
      if out.any():
        raise ValueError(
            "trace.tokens has ids outside the model vocabulary [0,"
            f" {vocab_size}): {sorted(set(tokens[out].tolist()))}."
        )
    gen_logp = logp[generated]
    if not (np.isfinite(gen_logp) & (gen_logp <= 0.0)).all():
      raise ValueError("trace.action_logp must be finite and <= 0.")
    if stop_ids:
      _check_stops(tokens, steps, lengths, bd.block_size, stop_ids)
    return self


def _check_steps(steps, lengths, block_size) -> None:
  """Whole blocks, generated as a prefix, each with steps 0..k-1."""
  if ((steps < -1) | (steps >= block_size)).any():
    bad = steps[(steps < -1) | (steps >= block_size)]
    raise ValueError(
        f"trace.action_step must be in [-1, block_size={block_size}), got"
        f" {sorted(set(bad.tolist()))}."
    )
  batch = steps.shape[0]
  blocks = completion_blocks(lengths, steps.shape[1], block_size)
  rows = np.broadcast_to(np.arange(batch)[:, None], steps.shape)
  size = np.zeros((batch, int(blocks.max()) + 1), np.int64)
  done = np.zeros_like(size)
  np.add.at(size, (rows, blocks), 1)
  np.add.at(done, (rows, blocks), steps >= 0)
  mixed = (done > 0) & (done < size)
  if mixed.any():
    row, block = np.argwhere(mixed)[0]
    raise ValueError(
        f"trace.action_step of row {row} has -1 in the middle of generated"
        f" completion block {block}; a row commits whole blocks."
    )
  whole = done > 0
  resumed = whole[:, 1:] & ~whole[:, :-1]
  if resumed.any():
    row, block = np.argwhere(resumed)[0]
    raise ValueError(
        f"trace.action_step of row {row} generates completion block"
        f" {block + 1} after an ungenerated block; -1 must be a tail."
    )
  generated = steps >= 0
  used = np.zeros(size.shape + (block_size,), bool)
  used[rows[generated], blocks[generated], steps[generated]] = True
  # Every step commits at least one position: the used steps are 0..k-1.
  gap = used[:, :, 1:] & ~used[:, :, :-1]
  if gap.any():
    row, block, _ = np.argwhere(gap)[0]
    raise ValueError(
        f"trace.action_step of row {row}, completion block {block}: steps"
        f" {np.flatnonzero(used[row, block]).tolist()} are not 0..k-1"
        " (every step commits at least one position)."
    )


def _check_stops(tokens, steps, lengths, block_size, stop_ids) -> None:
  """A row generates up to its first stop block, or every block."""
  blocks = completion_blocks(lengths, steps.shape[1], block_size)
  stops = np.isin(tokens, np.asarray(stop_ids, np.int64)) & (steps >= 0)
  last = blocks.max(axis=1)
  stop_block = np.where(stops, blocks, last[:, None] + 1).min(axis=1)
  stop_block = np.minimum(stop_block, last)
  generated_to = np.where(steps >= 0, blocks, -1).max(axis=1)
  bad = generated_to != stop_block
  if bad.any():
    raise ValueError(
        "trace rows"
        f" {np.flatnonzero(bad).tolist()} end at completion blocks"
        f" {generated_to[bad].tolist()}, but their stop blocks are"
        f" {stop_block[bad].tolist()}: denoising left masked positions (or"
        " ran past a stop token)."
    )


def to_tunix_layout(trace: Trace, *, pad_id: int) -> dict[str, np.ndarray]:
  """A concrete trace's prompt and completion in Tunix's RL `TrainExample`
  layout, without loss beside the trace's own fields (docs/design.md
  "Trace"): NumPy `[batch, P]` and `[batch, T]` arrays.

  `prompt_ids` int32 LEFT-padded with `pad_id` (as Tunix's
  `RolloutOutput.left_padded_prompt_tokens`), `prompt_mask` bool True on
  the real prompt tokens; `completion_ids` int32 RIGHT-padded (slot j in
  column j, `pad_id` where never generated), `completion_mask` bool
  `action_step >= 0` (every action, the slots after the first stop token
  in its block included).
  """
  trace.validate()
  prompt = np.asarray(trace.prompt_tokens)
  lengths = np.asarray(trace.prompt_lengths)
  width = prompt.shape[1]
  # Left padding: real token i of row r goes to column width - P_r + i.
  source = np.arange(width)[None, :] - (width - lengths[:, None])
  prompt_mask = source >= 0
  gathered = np.take_along_axis(prompt, np.clip(source, 0, width - 1), axis=1)
  completion_mask = np.asarray(trace.action_step) >= 0
  return dict(
      prompt_ids=np.where(prompt_mask, gathered, pad_id).astype(np.int32),
      prompt_mask=prompt_mask,
      completion_ids=np.where(
          completion_mask, np.asarray(trace.tokens), pad_id
      ).astype(np.int32),
      completion_mask=completion_mask,
  )
