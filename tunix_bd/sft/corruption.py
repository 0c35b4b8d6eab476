# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Masked-diffusion SFT corruption: a pure NumPy function of one example.

`corrupt_example` turns one `TokenizedDataset` row into the canvases the SFT
loss trains on (docs/design.md "Corruption (SFT)"), a function of `(seed,
example id, epoch)` only. A block whose first row corrupted all its eligible
tokens has no corruption at all in the complementary row; it simply
contributes no loss.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np

from tunix_bd import config_utils
from tunix_bd.core import bd_config
from tunix_bd.core import eos as eos_lib

UNIFORM = "uniform"
INVERSE_T = "inverse_t"
LOSS_WEIGHTINGS = (UNIFORM, INVERSE_T)

# The last word of the RNG entropy names the stream, in SFT and OPD alike.
# NumPy's SeedSequence ignores trailing zeros ([s, i] and [s, i, 0] give the
# same stream), so the streams end with distinct non-zero words.
CORRUPTION_STREAM = 1
ORDER_STREAM = 2
PACKING_STREAM = 3  # The order SFT packs examples in, `[seed, stream]`.

# Every field of a corrupted example (and of an SFT batch), `[rows, length]`,
# and its dtype.
_DTYPES = {
    "tokens": np.int32,
    "noisy_tokens": np.int32,
    "positions": np.int32,
    "segment_ids": np.int32,
    "completion_mask": np.bool_,
    "corruption_mask": np.bool_,
    "loss_weights": np.float32,
    "noise_level": np.float32,
}
FIELDS = tuple(_DTYPES)


def _check_noise(name: str, value: Any) -> float:
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)
  ):
    raise ValueError(
        f"{name} must be a number in (0, 1], got {type(value).__name__}:"
        f" {value!r}."
    )
  if not math.isfinite(value) or not 0.0 < value <= 1.0:
    raise ValueError(f"{name} must be in (0, 1], got {value!r}.")
  return float(value)


@dataclasses.dataclass(frozen=True)
class SftCorruptionConfig:
  """How SFT corrupts completions (part of the run's fingerprint).

  Attributes:
    min_noise: lower end of the per-block noise level, in (0, 1].
    max_noise: upper end, in [min_noise, 1].
    complementary: add the complementary row of each example.
    loss_weighting: one of `LOSS_WEIGHTINGS`; `inverse_t` weights a
      corrupted token by 1/t (the masked-diffusion ELBO weight).
    seed: seeds the corruption draws, an int >= 0.
  """

  min_noise: float = 1e-3
  max_noise: float = 1.0
  complementary: bool = False
  loss_weighting: str = UNIFORM
  seed: int = 0

  def __post_init__(self):
    min_noise = _check_noise("corruption.min_noise", self.min_noise)
    max_noise = _check_noise("corruption.max_noise", self.max_noise)
    if min_noise > max_noise:
      raise ValueError(
          f"corruption.min_noise={min_noise} must be <= max_noise={max_noise}."
      )
    if not isinstance(self.complementary, (bool, np.bool_)):
      raise ValueError(
          "corruption.complementary must be a bool, got"
          f" {self.complementary!r}."
      )
    config_utils.check_choice(
        "corruption.loss_weighting", self.loss_weighting, LOSS_WEIGHTINGS
    )
    if (
        self.complementary
        and self.loss_weighting == INVERSE_T
        and max_noise == 1.0
    ):
      # The complementary row's noise level 1 - t reaches 0: its 1/(1 - t)
      # weights would be unbounded.
      raise ValueError(
          "corruption.complementary=True with loss_weighting='inverse_t' needs"
          " max_noise < 1 (the complementary row's noise level is 1 - t),"
          f" got max_noise={max_noise}."
      )
    if (
        isinstance(self.seed, bool)
        or not isinstance(self.seed, (int, np.integer))
        or self.seed < 0
    ):
      raise ValueError(
          f"corruption.seed must be an int >= 0, got {self.seed!r}."
      )
    object.__setattr__(self, "min_noise", min_noise)
    object.__setattr__(self, "max_noise", max_noise)
    object.__setattr__(self, "complementary", bool(self.complementary))
    object.__setattr__(self, "seed", int(self.seed))


def corrupt_blocks(
    rng: np.random.Generator,
    eligible: np.ndarray,
    blocks: np.ndarray,
    *,
    num_blocks: int,
    corruption: SftCorruptionConfig,
) -> tuple[np.ndarray, np.ndarray]:
  """The corruption draw of one row, SFT's and OPD's: one noise level t ~
  U[min_noise, max_noise] per block, and an eligible slot corrupted if its
  uniform draw is below t (in a block with eligible slots, at least the one
  with the smallest draw).

  Args:
    rng: the row's generator, `default_rng([seed, ..., CORRUPTION_STREAM])`.
    eligible: bool `[length]`, the slots that may be corrupted.
    blocks: int `[length]` block of each slot, in `[0, num_blocks)`.

  Returns:
    `(corrupted, t)`: bool `[length]` and float32 `[length]`, the noise level
    of each slot's block.
  """
  t = rng.uniform(corruption.min_noise, corruption.max_noise, num_blocks)
  t = t.astype(np.float32)[blocks]
  draws = rng.random(eligible.shape[0])
  eligible_draws = np.where(eligible, draws, np.inf)
  smallest = np.full(num_blocks, np.inf)
  np.minimum.at(smallest, blocks, eligible_draws)
  forced = eligible & (eligible_draws == smallest[blocks])
  return (eligible & (draws < t)) | forced, t


def corrupt_example(
    row: Mapping[str, Any],
    *,
    example_id: int,
    epoch: int,
    corruption: SftCorruptionConfig,
    config: bd_config.BlockDiffusionConfig,
    eos_id: int,
) -> dict[str, np.ndarray]:
  """Corrupts one example, deterministically in `(seed, example_id, epoch)`.

  Args:
    row: a `TokenizedDataset.row()` that `sft.batching.validate_dataset`
      passed: `tokens`, `completion_mask` and `valid_mask`, each `[length]`,
      right-padded, the completion ending with EOS, the EOS fill in range.
    eos_id: the EOS id, which also fills the completion's last block.

  Returns:
    `FIELDS`, each `[rows, length]`, 2 rows with `complementary` (row 1 the
    complementary row), else 1: int32 `tokens` (clean, EOS fill applied),
    `noisy_tokens`, `positions` (the physical index), `segment_ids` (1 real,
    0 pad); bool `completion_mask` (completion incl. EOS fill) and
    `corruption_mask`; float32 `loss_weights` and `noise_level` (the t of
    each position's block).
  """
  tokens = np.asarray(row["tokens"])
  length = int(np.sum(row["valid_mask"]))
  prompt_length = length - int(np.sum(row["completion_mask"]))
  max_length = tokens.shape[0]
  block_size, mask_id = config.block_size, config.mask_token_id
  end = eos_lib.fill_length(length, block_size)

  positions = np.arange(max_length, dtype=np.int32)
  clean = tokens.astype(np.int32)
  clean[eos_lib.fill_mask(length - 1, positions, block_size)] = eos_id
  segment_ids = (positions < end).astype(np.int32)
  eligible = (positions >= prompt_length) & (positions < end)

  rng = np.random.default_rng(
      [corruption.seed, int(example_id), int(epoch), CORRUPTION_STREAM]
  )
  corrupted, t = corrupt_blocks(
      rng,
      eligible,
      positions // block_size,
      num_blocks=-(-max_length // block_size),
      corruption=corruption,
  )

  rows = [(corrupted, t)]
  if corruption.complementary:
    rows.append((eligible & ~corrupted, (1.0 - t).astype(np.float32)))
  out = {key: [] for key in FIELDS}
  for row_corrupted, noise_level in rows:
    if corruption.loss_weighting == UNIFORM:
      weights = row_corrupted.astype(np.float32)
    else:
      weights = np.zeros(max_length, np.float32)
      np.divide(1.0, noise_level, out=weights, where=row_corrupted)
    out["tokens"].append(clean)
    out["noisy_tokens"].append(np.where(row_corrupted, mask_id, clean))
    out["positions"].append(positions)
    out["segment_ids"].append(segment_ids)
    out["completion_mask"].append(eligible)
    out["corruption_mask"].append(row_corrupted)
    out["loss_weights"].append(weights)
    out["noise_level"].append(noise_level)
  return {
      key: np.stack(values).astype(_DTYPES[key]) for key, values in out.items()
  }
