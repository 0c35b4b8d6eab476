# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What tunix_bd's Tunix trainers add: aux metrics and a checkpoint fingerprint.

Tunix 0.1.7's `PeftTrainer` (and so `DistillationTrainer`) drops a loss's
aux metrics. `AuxMetricsMixin` buffers them and reduces them over the
micro-batches of each update step (and over the whole eval set at each
evaluation): totals are summed, `(numerator, denominator)` pairs become
sum(numerator) / sum(denominator), so they describe the global batch
exactly. They are logged through `metrics_logger` under the trainer's
metrics prefix, like `loss`; a ratio with a zero denominator is not logged.
It also stores the run's fingerprint in every checkpoint's metadata.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import fingerprint as fingerprint_lib


def _total(values: list[np.ndarray]) -> float:
  return float(np.sum(values, dtype=np.float64))


def _ratio(values: list[np.ndarray]) -> float | None:
  numerator, denominator = np.sum(np.stack(values), axis=0, dtype=np.float64)
  # An empty bucket has no value this step; None is not logged.
  return None if denominator == 0 else float(numerator / denominator)


class AuxMetricsMixin:
  """Mixed in before a Tunix `PeftTrainer` subclass (see the module doc)."""

  _fingerprint: dict[str, Any] | None = None

  def _set_fingerprint(self, fingerprint: Mapping[str, Any] | None) -> None:
    """Stores `fingerprint` (None: nothing) in every checkpoint's metadata."""
    self._fingerprint = None if fingerprint is None else dict(fingerprint)

  def custom_checkpoint_metadata(self) -> dict[str, Any]:
    if self._fingerprint is None:
      return {}
    return {fingerprint_lib.METADATA_KEY: self._fingerprint}

  def _buffer_aux(self, buffer, aux: Mapping[str, jax.Array] | None) -> None:
    if buffer is None or not aux:
      return
    for name, value in aux.items():
      entry = buffer.additional_metrics.get(name)
      if entry is None:
        op = _total if jnp.ndim(value) == 0 else _ratio
        buffer.additional_metrics[name] = ([value], op)
      else:
        entry[0].append(value)

  def _post_process_train_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_train_metrics, aux)

  def _post_process_eval_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_eval_metrics, aux)

  def _log_metrics(self, loss, step=None, additional_metrics=None):
    additional_metrics = {
        k: v for k, v in (additional_metrics or {}).items() if v is not None
    }
    super()._log_metrics(loss, step, additional_metrics)
