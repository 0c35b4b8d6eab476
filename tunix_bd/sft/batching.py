# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""SFT batch streams for `PeftTrainer`, checked before any compute.

`sft_batches` checks its sizes (naming the config keys that set them) and
every row of the data (`validate_dataset`), then serves
`micro_batches.MicroBatches`. `train_and_eval_batches` builds the training
stream and the held-out one (`ONE_PASS`) from the `train` and `eval`
sections.
"""

from __future__ import annotations

import grain
import numpy as np

from tunix_bd import config_utils
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import micro_batches
from tunix_bd.training import options


def validate_dataset(
    dataset: dataset_lib.TokenizedDataset,
    config: bd_config.BlockDiffusionConfig,
    eos_id: int,
) -> None:
  """Checks every row up front, naming the first offending example (its
  `Conversation.where`): those that pass are what `corrupt_example` takes."""
  lengths = np.asarray(dataset.lengths, np.int64)
  prompt_lengths = np.asarray(dataset.prompt_lengths, np.int64)
  block_size = config.block_size
  ends = -(-lengths // block_size) * block_size
  checks = [
      (
          prompt_lengths >= lengths,
          lambda i: "the row has no completion to supervise",
      ),
      (
          ends > dataset.max_length,
          lambda i: (
              f"{lengths[i]} tokens plus the EOS fill to the end of their"
              f" block (block_size={block_size}) need {ends[i]} positions,"
              f" more than max_length={dataset.max_length}; raise"
              " max_length or drop the example"
          ),
      ),
      (
          dataset.tokens[np.arange(len(dataset)), np.maximum(lengths - 1, 0)]
          != eos_id,
          lambda i: f"the completion does not end with EOS (id {eos_id})",
      ),
      (
          (
              (dataset.tokens == config.mask_token_id)
              & (np.arange(dataset.max_length)[None, :] < lengths[:, None])
          ).any(axis=1),
          lambda i: (
              f"a real token equals mask_token_id={config.mask_token_id}"
          ),
      ),
  ]
  if config.alignment == bd_config.SHIFTED:
    checks.append((
        prompt_lengths < 1,
        lambda i: (
            f"alignment={bd_config.SHIFTED!r} needs logical position 0 to"
            " be prompt context, but the prompt is empty"
        ),
    ))
  for bad, describe in checks:
    if bad.any():
      first = int(np.flatnonzero(bad)[0])
      where = f"example {first}"
      if first < len(dataset.conversations):
        where = dataset.conversations[first].where
      raise ValueError(
          f"{where}: {describe(first)} ({int(bad.sum())} examples fail this"
          " check)."
      )


def sft_batches(
    dataset: dataset_lib.TokenizedDataset,
    *,
    batch_size: int,
    corruption: corruption_lib.SftCorruptionConfig,
    config: bd_config.BlockDiffusionConfig,
    eos_id: int,
    seed: int,
    gradient_accumulation_steps: int | None = 1,
    num_epochs: int | None = None,
    shuffle: bool = True,
    section: str = "",
    packing: bool = False,
) -> grain.MapDataset:
  """The SFT micro-batch stream for `PeftTrainer`, every row validated.

  Args:
    batch_size: rows per global batch (one optimizer update): examples, or
      with `packing` packed rows.
    gradient_accumulation_steps: k micro-batches per global batch (None:
      1); must divide `batch_size`.
    num_epochs: passes over the data; None repeats forever.
    section: the config section of the sizes (e.g. "train"), for errors.
    packing: several examples to a row (`data.packing`, `sft.packing`).

  Returns:
    A MapDataset of `micro_batches.SftBatch` micro-batches of `batch_size //
    k` rows (2 rows each with `corruption.complementary`). Iterating it uses
    grain's default read options (16 threads, 500 items prefetched); for
    large batches, hand the trainer `ds.to_iter_dataset(grain.ReadOptions(
    ...))` with a smaller buffer.
  """
  prefix = f"{section}." if section else ""
  batch_size = config_utils.check_int(f"{prefix}batch_size", batch_size, 1)
  k = config_utils.check_int(
      f"{prefix}gradient_accumulation_steps",
      1 if gradient_accumulation_steps is None else gradient_accumulation_steps,
      1,
  )
  seed = config_utils.check_int("seed", seed, 0)
  if num_epochs is not None:
    num_epochs = config_utils.check_int("num_epochs", num_epochs, 1)
  if batch_size % k:
    raise ValueError(
        f"{prefix}gradient_accumulation_steps={k} must divide"
        f" {prefix}batch_size={batch_size} (the examples of one optimizer"
        " update)."
    )
  dataset_lib.check_batch_size(dataset, batch_size, f"{prefix}batch_size")
  validate_dataset(dataset, config, eos_id)
  source = micro_batches.MicroBatches(
      dataset,
      batch_size=batch_size,
      accumulation_steps=k,
      corruption=corruption,
      config=config,
      eos_id=eos_id,
      seed=seed,
      num_epochs=num_epochs,
      shuffle=shuffle,
      packing=bool(packing),
  )
  if batch_size > len(source.rows):
    raise ValueError(
        f"{prefix}batch_size={batch_size} exceeds the {len(source.rows)} rows"
        f" that the {len(dataset)} examples of its dataset pack into"
        " (data.packing=True); lower it, give more examples or set"
        " data.packing=False."
    )
  return grain.MapDataset.source(source)


# `sft_batches` of held-out data: one unshuffled pass of epoch 0 canvases
# (the same at every evaluation), each batch its own global batch
# (`global_weight` its own total), so the loss gives its weighted mean.
ONE_PASS = dict(
    seed=0, gradient_accumulation_steps=1, num_epochs=1, shuffle=False
)


def train_and_eval_batches(
    train_data: dataset_lib.TokenizedDataset,
    eval_data: dataset_lib.TokenizedDataset,
    *,
    train: options.Train,
    eval_batch_size: int,
    corruption: corruption_lib.SftCorruptionConfig,
    config: bd_config.BlockDiffusionConfig,
    eos_id: int,
    seed: int,
    packing: bool = False,
) -> tuple[grain.MapDataset, grain.MapDataset]:
  """`(train_batches, eval_batches)`: `sft_batches` of `train` forever, and
  one pass (`ONE_PASS`) of the held-out data, both validated now."""
  shared = dict(
      corruption=corruption, config=config, eos_id=eos_id, packing=packing
  )
  train_batches = sft_batches(
      train_data,
      batch_size=train.batch_size,
      seed=seed,
      gradient_accumulation_steps=train.gradient_accumulation_steps,
      section="train",
      **shared,
  )
  held_out = sft_batches(
      eval_data,
      batch_size=eval_batch_size,
      section="eval",
      **shared,
      **ONE_PASS,
  )
  return train_batches, held_out
