# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Packed SFT rows: several examples to a row, each in whole blocks.

`first_fit` decides which examples share a row, `join` lays their
corrupted rows side by side, each with the blocks, positions and noise it
has alone under its own segment id (docs/design.md "Packed rows (SFT)").
"""

from __future__ import annotations

import heapq

import numpy as np

_NONE = np.iinfo(np.int64).max


def first_fit(
    ends: np.ndarray, max_length: int, block_size: int, order: np.ndarray
) -> list[np.ndarray]:
  """Greedy first-fit of examples into rows of `max_length` tokens.

  Args:
    ends: int `[num_examples]`, each example's tokens plus its EOS fill: a
      multiple of `block_size`, at most `max_length` (`batching` checked).
    order: the example ids in the order they are placed.

  Returns:
    The rows, each the ascending ids of its examples, ordered by their first
    id: with nothing packed, `[[0], [1], ...]`.
  """
  units = max_length // block_size
  needs = np.asarray(ends, np.int64) // block_size
  # Free blocks -> a min-heap of the rows with that many, and each heap's
  # smallest row: the first row that fits is the least top from `need` on.
  heaps = [[] for _ in range(units + 1)]
  tops = np.full(units + 1, _NONE, np.int64)
  rows = []
  for example in order:
    need = int(needs[example])
    free = need + int(np.argmin(tops[need:]))
    if tops[free] == _NONE:
      row, free = len(rows), units
      rows.append([])
    else:
      row = heapq.heappop(heaps[free])
      tops[free] = heaps[free][0] if heaps[free] else _NONE
    rows[row].append(int(example))
    if free > need:
      heapq.heappush(heaps[free - need], row)
      tops[free - need] = heaps[free - need][0]
  return sorted((np.sort(r) for r in rows), key=lambda r: r[0])


def join(examples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  """One packed row of `corruption.corrupt_example` outputs: example j's
  tokens and EOS fill follow the examples before it, under segment id j +
  1, positions still from 0; the rest is the first example's padding.
  """
  first = examples[0]
  ends = [int(np.sum(e["segment_ids"][0])) for e in examples]
  used = sum(ends)
  out = {}
  for key, value in first.items():
    parts = [e[key][:, :end] for e, end in zip(examples, ends)]
    if key == "segment_ids":
      parts = [p * (j + 1) for j, p in enumerate(parts)]
    out[key] = np.concatenate([*parts, value[:, used:]], axis=1)
  return out
