# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Fail-closed checks of what block denoising is given, before any compute.

Errors about prompts and seeds name the rows.
"""

from __future__ import annotations

from flax import nnx
import jax
import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families


def check_model(model, bd, config) -> int:
  """Checks a model and its settings for denoising; returns the vocab size."""
  if not isinstance(bd, bd_config_lib.BlockDiffusionConfig):
    raise ValueError(
        f"bd must be a BlockDiffusionConfig, got {type(bd).__name__}."
    )
  if not isinstance(model, nnx.Module) or not hasattr(model, "config"):
    raise ValueError("model must be a Tunix nnx.Module with a config.")
  families.family(model.config)
  bd.validate_for_model(
      model.config,
      pad_id=config.pad_id,
      eos_id=None,
      stop_ids=config.stop_ids,
  )
  return model.config.vocab_size


def prompts(prompt_tokens, prompt_lengths, config, bd, vocab_size):
  """Validates the prompts of a batch, before any compute.

  Returns:
    int32 `[batch, config.max_prompt_length]` prompts right-padded with
    `config.pad_id`, and their int32 `[batch]` lengths.
  """
  if prompt_lengths is None:
    if isinstance(prompt_tokens, (np.ndarray, jax.Array)):
      raise ValueError("prompt_lengths is required with a padded array.")
    rows = [np.asarray(row).reshape(-1) for row in prompt_tokens]
    lengths = np.asarray([len(row) for row in rows], np.int64)
  else:
    padded = np.asarray(prompt_tokens)
    lengths = np.asarray(prompt_lengths)
    if padded.ndim != 2 or lengths.shape != padded.shape[:1]:
      raise ValueError(
          "prompt_tokens must be [batch, length] with prompt_lengths [batch],"
          f" got {padded.shape} and {lengths.shape}."
      )
    if not np.issubdtype(lengths.dtype, np.integer):
      raise ValueError(f"prompt_lengths must be integer, got {lengths.dtype}.")
    if (lengths > padded.shape[1]).any():
      raise ValueError(
          f"prompt_lengths {lengths.tolist()} exceed the array width"
          f" {padded.shape[1]}."
      )
    rows = [row[:n] for row, n in zip(padded, np.maximum(lengths, 0))]
  if not rows:
    raise ValueError("the batch is empty; pass at least one prompt.")
  if (lengths < 1).any():
    raise ValueError(
        f"prompts of rows {np.flatnonzero(lengths < 1).tolist()} are empty;"
        " every row needs a prompt of at least one token."
    )
  too_long = lengths > config.max_prompt_length
  if too_long.any():
    raise ValueError(
        f"prompts of rows {np.flatnonzero(too_long).tolist()} have"
        f" {lengths[too_long].tolist()} tokens, more than"
        f" max_prompt_length={config.max_prompt_length}."
    )
  out = np.full((len(rows), config.max_prompt_length), config.pad_id, np.int32)
  for r, row in enumerate(rows):
    if not np.issubdtype(row.dtype, np.integer):
      raise ValueError(
          f"prompt row {r} must hold integer ids, got {row.dtype}."
      )
    if ((row < 0) | (row >= vocab_size)).any():
      raise ValueError(
          f"prompt row {r} has ids outside the vocabulary [0, {vocab_size})."
      )
    if (row == bd.mask_token_id).any():
      raise ValueError(
          f"prompt row {r} contains the mask token {bd.mask_token_id}."
      )
    out[r, : len(row)] = row
  return out, lengths.astype(np.int32)


def seeds(values, batch: int, config) -> np.ndarray:
  """Validated uint32 `[batch]` per-row seeds (zeros when greedy and None)."""
  if values is None:
    if not config.greedy:
      # A default such as the row index would tie a row's samples to its
      # place in the batch.
      raise ValueError(
          f"temperature={config.temperature} samples: pass one seed per row."
      )
    return np.zeros((batch,), np.uint32)
  values = np.asarray(values)
  if values.shape != (batch,) or not np.issubdtype(values.dtype, np.integer):
    raise ValueError(
        f"seeds must be {batch} ints (one per row), got {values.shape}"
        f" {values.dtype}."
    )
  if ((values < 0) | (values >= 2**32)).any():
    raise ValueError("seeds must be in [0, 2**32).")
  return values.astype(np.uint32)
