# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one EOS and padding rule shared by SFT, generation, OPD, RL and eval.

docs/design.md "EOS and padding" (rules 1-4, on logical positions).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def fill_length(completion_end: int, block_size: int) -> int:
  """Logical end of the EOS-filled block: the smallest multiple of
  `block_size` >= `completion_end` (one past the first EOS)."""
  return -(-completion_end // block_size) * block_size


def fill_mask(
    stop_position: np.ndarray | int, positions: np.ndarray, block_size: int
) -> np.ndarray:
  """Where the EOS fill goes (rule 1): after the stop, to its block's end.

  `stop_position` is the stop token's logical position, a scalar or int
  `[batch, 1]` (a row without a stop passes a position no logical position
  reaches, e.g. the canvas length); `positions` int `[..., length]` are the
  slots'. Returns bool of the broadcast shape.
  """
  stop_position = np.asarray(stop_position)
  block_end = fill_length(stop_position + 1, block_size)
  return (positions > stop_position) & (positions < block_end)


def first_stop_index(tokens: np.ndarray, stop_ids: Sequence[int]) -> np.ndarray:
  """int `[batch]` index of each row's first stop token (or its length):
  where the returned completion of `[batch, length]` `tokens` ends."""
  tokens = np.asarray(tokens)
  is_stop = np.isin(tokens, np.asarray(list(stop_ids)))
  has_stop = is_stop.any(axis=-1)
  return np.where(has_stop, is_stop.argmax(axis=-1), tokens.shape[-1])


def truncate_at_stop(
    tokens: np.ndarray, stop_ids: Sequence[int]
) -> list[np.ndarray]:
  """Each row's completion before its first stop token (rule 4)."""
  tokens = np.asarray(tokens)
  ends = first_stop_index(tokens, stop_ids)
  return [row[:end] for row, end in zip(tokens, ends)]
