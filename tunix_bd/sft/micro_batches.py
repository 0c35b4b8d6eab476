# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The SFT micro-batch, and the grain source that assembles the stream.

A global batch (`batch_size` rows, one optimizer update; a row is one
example, or with `packing` several) is split into k =
`gradient_accumulation_steps` `SftBatch` micro-batches carrying the
`core.denominators` fields. The stream is a pure function of the index
(docs/design.md "Corruption (SFT)"), so a resumed `PeftTrainer` trains on
exactly the canvases an uninterrupted run would. `MicroBatches` checks
nothing: `sft.batching` validates first.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import sys
import threading
from typing import Any, Callable

import flax
import grain
import numpy as np

from tunix_bd.core import bd_config
from tunix_bd.core import denominators
from tunix_bd.core import eos as eos_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import packing as packing_lib


@flax.struct.dataclass(frozen=True)
class SftBatch:
  """An SFT micro-batch: the rows of `corruption_lib.corrupt_example` (an
  example's rows adjacent) plus the denominator fields, batch-major.

  Attributes:
    tokens: int32 `[batch, length]` clean canvases (the targets), EOS fill
      applied.
    noisy_tokens: int32 `[batch, length]` corrupted canvases.
    positions: int32 `[batch, length]` logical positions, from 0 in each
      example.
    segment_ids: int32 `[batch, length]`, 0 pad, 1.. the row's examples.
    completion_mask: bool `[batch, length]` the completion, EOS fill
      included (the loss-eligible positions).
    corruption_mask: bool `[batch, length]` the supervised positions.
    loss_weights: float32 `[batch, length]` weights of corrupted positions.
    noise_level: float32 `[batch, length]` noise level t of each position's
      block.
    global_weight: float32 `[batch]` total loss weight of the global batch.
    accumulation_steps: int32 `[batch]` micro-batches per global batch (k).
  """

  tokens: Any
  noisy_tokens: Any
  positions: Any
  segment_ids: Any
  completion_mask: Any
  corruption_mask: Any
  loss_weights: Any
  noise_level: Any
  global_weight: Any
  accumulation_steps: Any


class _ComputeOnce:
  """A small thread-safe cache that computes each key once: grain's threads
  ask for a global batch's k micro-batches about together, which must not
  corrupt it k times. Pickling (for grain workers) drops the entries.
  """

  def __init__(self, compute: Callable[[int], Any], max_entries: int):
    self._compute = compute
    self._max_entries = max_entries
    self._lock = threading.Lock()
    self._entries = collections.OrderedDict()

  def __getstate__(self):
    return {"compute": self._compute, "max_entries": self._max_entries}

  def __setstate__(self, state):
    self.__init__(state["compute"], state["max_entries"])

  def __call__(self, key: int) -> Any:
    with self._lock:
      future = self._entries.get(key)
      owner = future is None
      if owner:
        future = self._entries[key] = concurrent.futures.Future()
        while len(self._entries) > self._max_entries:
          self._entries.popitem(last=False)
    if owner:
      try:
        future.set_result(self._compute(key))
      except Exception as e:  # pylint: disable=broad-exception-caught
        with self._lock:  # Not cached: the next request computes again.
          self._entries.pop(key, None)
        future.set_exception(e)
    return future.result()  # Waits for the owner; raises its error.


class MicroBatches(grain.sources.RandomAccessDataSource):
  """Item m: micro-batch m % k of global batch m // k, an `SftBatch`.

  Each item holds `batch_size // k` rows (2 each with
  `corruption.complementary`), `dataset.max_length` wide. The rows are
  fixed once: one example each or, with `packing`, first-fit
  in a seeded order (`PACKING_STREAM`; the dataset's without `shuffle`).
  Each global batch is the next `batch_size` rows of its epoch's order. The
  arguments are `batching.sft_batches`'.
  """

  def __init__(
      self,
      dataset: dataset_lib.TokenizedDataset,
      *,
      batch_size: int,
      accumulation_steps: int,
      corruption: corruption_lib.SftCorruptionConfig,
      config: bd_config.BlockDiffusionConfig,
      eos_id: int,
      seed: int,
      num_epochs: int | None,
      shuffle: bool,
      packing: bool = False,
  ):
    self._dataset, self._batch_size = dataset, batch_size
    self._k = accumulation_steps
    self._corrupt = functools.partial(
        corruption_lib.corrupt_example,
        corruption=corruption,
        config=config,
        eos_id=eos_id,
    )
    self._seed, self._num_epochs, self._shuffle = seed, num_epochs, shuffle
    self.rows = [np.array([i]) for i in range(len(dataset))]
    if packing:
      order = np.arange(len(dataset))
      if shuffle:
        order = np.random.default_rng(
            [seed, corruption_lib.PACKING_STREAM]
        ).permutation(order)
      self.rows = packing_lib.first_fit(
          eos_lib.fill_length(np.asarray(dataset.lengths), config.block_size),
          dataset.max_length,
          config.block_size,
          order,
      )
    self._batches_per_epoch = len(self.rows) // batch_size
    self._orders = _ComputeOnce(self._order, max_entries=2)
    self._global_batches = _ComputeOnce(self._global_batch, max_entries=8)

  def __len__(self) -> int:
    if self._num_epochs is None:
      return sys.maxsize
    return self._num_epochs * self._batches_per_epoch * self._k

  def _order(self, epoch: int) -> np.ndarray:
    if not self._shuffle:
      return np.arange(len(self.rows))
    rng = np.random.default_rng(
        [self._seed, epoch, corruption_lib.ORDER_STREAM]
    )
    return rng.permutation(len(self.rows))

  def _global_batch(self, index: int) -> dict[str, np.ndarray]:
    """Global batch `index`: `FIELDS` `[batch_size * rows, L]` + its weight."""
    epoch, within = divmod(index, self._batches_per_epoch)
    rows = self._orders(epoch)[
        within * self._batch_size : (within + 1) * self._batch_size
    ]
    # Each example gets the noise it gets alone: a function of its id.
    rows = [
        packing_lib.join([
            self._corrupt(
                self._dataset.row(int(i)), example_id=int(i), epoch=epoch
            )
            for i in self.rows[r]
        ])
        for r in rows
    ]
    # A row's complementary pair stays adjacent, so it always lands in one
    # micro-batch.
    batch = {
        key: np.concatenate([row[key] for row in rows])
        for key in corruption_lib.FIELDS
    }
    batch[denominators.GLOBAL_WEIGHT] = np.float32(
        batch["loss_weights"].sum(dtype=np.float64)
    )
    return batch

  def __getitem__(self, index: int) -> SftBatch:
    index = int(index)
    if not 0 <= index < len(self):
      raise IndexError(f"micro-batch {index} is out of range.")
    global_index, micro = divmod(index, self._k)
    batch = self._global_batches(global_index)
    rows = batch["tokens"].shape[0] // self._k
    part = slice(micro * rows, (micro + 1) * rows)
    return SftBatch(
        **{key: batch[key][part] for key in corruption_lib.FIELDS},
        **denominators.batch_fields(
            batch[denominators.GLOBAL_WEIGHT], self._k, rows
        ),
    )
