# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What tunix_bd's Tunix trainers add: aux metrics, checkpoints' fingerprint.

Tunix 0.1.7's `PeftTrainer` (and so `DistillationTrainer`) drops a loss's
aux metrics. `AuxMetricsMixin` reduces them over the micro-batches of each
update step (and over the eval set at each evaluation): totals are summed,
`(numerator, denominator)` pairs become sum(numerator) / sum(denominator),
exact for the global batch, and logged under the trainer's metrics prefix
like `loss` (a ratio over nothing is not logged). It also stores the run's
fingerprint in every checkpoint, and writes a step's train metrics with its
checkpoint (`write_metrics_at_checkpoints`, also for Tunix's own trainers).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib


def _total(values: list[np.ndarray]) -> float:
  return float(np.sum(values, dtype=np.float64))


def _ratio(values: list[np.ndarray]) -> float | None:
  numerator, denominator = np.sum(np.stack(values), axis=0, dtype=np.float64)
  # An empty bucket has no value this step; None is not logged.
  return None if denominator == 0 else float(numerator / denominator)


class _CheckpointsWithMetrics:
  """A trainer's checkpoint manager whose saves write the train metrics the
  trainer holds for the saved step (`write_metrics_at_checkpoints`)."""

  def __init__(self, manager: Any, trainer: Any):
    self._manager = manager
    self._trainer = trainer

  def __getattr__(self, name: str) -> Any:  # `latest_step`, `close`, ...
    return getattr(self._manager, name)

  def save(self, *args: Any, **kwargs: Any) -> bool:
    saved = self._manager.save(*args, **kwargs)
    if saved:
      compat.write_train_metrics(self._trainer)
    return saved


def write_metrics_at_checkpoints(trainer: Any) -> None:
  """Makes `trainer` (a Tunix `PeftTrainer`) write a step's train metrics
  as soon as that step's checkpoint is saved.

  Tunix writes them at the next update step, overlapping that step, so a
  run killed after a checkpoint lost that step's rows for good; a save has
  waited for its step already, so writing then costs no overlap. The step after it then writes
  nothing, as a first step does: its rows and `on_train_step_end` hooks
  come a step later or with its own checkpoint.
  """
  trainer.checkpoint_manager = _CheckpointsWithMetrics(
      trainer.checkpoint_manager, trainer
  )


class AuxMetricsMixin:
  """Mixed in before a Tunix `PeftTrainer` subclass (see the module doc):
  its `fingerprint` keyword (None: none) goes into every checkpoint."""

  def __init__(
      self, *args, fingerprint: Mapping[str, Any] | None = None, **kwargs
  ):
    self._fingerprint = None if fingerprint is None else dict(fingerprint)
    super().__init__(*args, **kwargs)
    write_metrics_at_checkpoints(self)

  def custom_checkpoint_metadata(self) -> dict[str, Any]:
    if self._fingerprint is None:
      return {}
    return {fingerprint_lib.METADATA_KEY: self._fingerprint}

  def _buffer_aux(self, buffer, aux: Mapping[str, jax.Array] | None) -> None:
    if buffer is None or not aux:
      return
    for name, value in aux.items():
      op = _total if jnp.ndim(value) == 0 else _ratio
      buffer.additional_metrics.setdefault(name, ([], op))[0].append(value)

  def _post_process_train_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_train_metrics, aux)

  def _post_process_eval_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_eval_metrics, aux)

  def _log_metrics(self, loss, step=None, additional_metrics=None):
    additional_metrics = {
        k: v for k, v in (additional_metrics or {}).items() if v is not None
    }
    super()._log_metrics(loss, step, additional_metrics)
