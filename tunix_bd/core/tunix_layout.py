# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A trace in Tunix's RL `TrainExample` layout, and back, without loss.

docs/design.md "Trace". The six fields, `[batch, P]` and `[batch, T]`:

  * `prompt_ids` int32, LEFT-padded with the pad id (as Tunix's
    `RolloutOutput.left_padded_prompt_tokens`); `prompt_mask` bool, True on
    the real prompt tokens (logical position 0 is the first True).
  * `completion_ids` int32, RIGHT-padded: slot j in column j, the pad id
    where never generated; `completion_mask` bool, `action_step >= 0` (every
    action, the slots after the first stop token in its block included).
  * `action_step` int32 and `action_logp` float32: the trace's own fields,
    riding beside the others; `bd` and `temperature` stay static.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import trace as trace_lib


def to_tunix_layout(
    trace: trace_lib.Trace, *, pad_id: int
) -> dict[str, np.ndarray]:
  """A concrete trace's six fields (module docstring), NumPy arrays.

  `pad_id` fills the prompt's left padding and never-generated slots.
  """
  trace.validate()
  prompt = np.asarray(trace.prompt_tokens)
  lengths = np.asarray(trace.prompt_lengths)
  width = prompt.shape[1]
  # Left padding: real token i of row r goes to column width - P_r + i.
  shift = width - lengths[:, None]
  source = np.arange(width)[None, :] - shift
  prompt_mask = source >= 0
  gathered = np.take_along_axis(prompt, np.clip(source, 0, width - 1), axis=1)
  steps = np.asarray(trace.action_step, np.int32)
  completion_mask = steps >= 0
  return dict(
      prompt_ids=np.where(prompt_mask, gathered, pad_id).astype(np.int32),
      prompt_mask=prompt_mask,
      completion_ids=np.where(
          completion_mask, np.asarray(trace.tokens), pad_id
      ).astype(np.int32),
      completion_mask=completion_mask,
      action_step=steps,
      action_logp=np.where(
          completion_mask, np.asarray(trace.action_logp), 0.0
      ).astype(np.float32),
  )


def from_tunix_layout(
    *,
    prompt_ids: Any,
    prompt_mask: Any,
    completion_ids: Any,
    completion_mask: Any,
    action_step: Any,
    action_logp: Any,
    bd: bd_config_lib.BlockDiffusionConfig,
    temperature: float,
) -> trace_lib.Trace:
  """The `Trace` of fields in Tunix's `TrainExample` layout; validated.

  The fields are `to_tunix_layout`'s (module docstring); `bd` and
  `temperature` are the rollout's (1.0 if greedy).
  """
  prompt_ids = np.asarray(prompt_ids)
  prompt_mask = np.asarray(prompt_mask, bool)
  if prompt_mask.shape != prompt_ids.shape or prompt_ids.ndim != 2:
    raise ValueError(
        f"prompt_mask {prompt_mask.shape} must have the [batch, P] shape of"
        f" prompt_ids {prompt_ids.shape}."
    )
  lengths = prompt_mask.sum(axis=1)
  width = prompt_ids.shape[1]
  left_padded = np.arange(width)[None, :] >= (width - lengths)[:, None]
  if (left_padded != prompt_mask).any():
    rows = np.flatnonzero((left_padded != prompt_mask).any(axis=1)).tolist()
    raise ValueError(
        f"prompt_mask of rows {rows} is not a left padding (real tokens"
        " must be the last columns)."
    )
  steps = np.asarray(action_step)
  if (
      np.asarray(completion_mask, bool).shape != steps.shape
      or (np.asarray(completion_mask, bool) != (steps >= 0)).any()
  ):
    raise ValueError(
        "completion_mask must be True exactly where action_step >= 0 (the"
        " generated slots)."
    )
  source = np.arange(width)[None, :] + (width - lengths)[:, None]
  prompt = np.take_along_axis(prompt_ids, np.clip(source, 0, width - 1), axis=1)
  # Right padding with 0: columns past a prompt's length are never read.
  prompt = np.where(source < width, prompt, 0)
  return trace_lib.Trace(
      prompt_tokens=prompt.astype(np.int32),
      prompt_lengths=lengths.astype(np.int32),
      tokens=np.asarray(completion_ids).astype(np.int32),
      action_step=steps.astype(np.int32),
      action_logp=np.asarray(action_logp, np.float32),
      temperature=temperature,
      bd=bd,
  ).validate()
