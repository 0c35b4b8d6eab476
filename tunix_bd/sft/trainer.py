# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionSftTrainer`: a `PeftTrainer` with the SFT loss and its metrics.

It plugs the loss in with `loss.configure`, logs the aux metrics (which
Tunix 0.1.7's `PeftTrainer` drops), checks that batches were split for its
gradient accumulation, and stores the run's fingerprint in every checkpoint.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.sft import batching
from tunix_bd.sft import loss as loss_lib


def _total(values: list[np.ndarray]) -> float:
  return float(np.sum(values, dtype=np.float64))


def _ratio(values: list[np.ndarray]) -> float | None:
  numerator, denominator = np.sum(np.stack(values), axis=0, dtype=np.float64)
  # An empty bucket has no value this step; None is not logged.
  return None if denominator == 0 else float(numerator / denominator)


class DiffusionSftTrainer(compat.PeftTrainer):
  """A `PeftTrainer` configured with the SFT loss that logs its aux metrics.

  Aux metrics are reduced over the micro-batches of each update step (and
  over the whole eval set at each evaluation): totals are summed, ratios
  are sum(numerator) / sum(denominator), so they describe the global batch
  exactly. They are logged through `metrics_logger` under the trainer's
  metrics prefix, like `loss`.
  """

  def __init__(
      self,
      model,
      optimizer,
      training_config: compat.TrainingConfig,
      *,
      config: bd_config.BlockDiffusionConfig,
      fingerprint: Mapping[str, Any] | None = None,
      num_noise_buckets: int = 4,
      metrics_logger=None,
      logits_fn: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
  ):
    """Builds the trainer.

    Args:
      model: the model to train.
      optimizer: an optax optimizer (Tunix wraps it in `MultiSteps` when
        `training_config.gradient_accumulation_steps` is set).
      training_config: Tunix's training config.
      config: the block-diffusion settings.
      fingerprint: a `tunix_bd.fingerprint.fingerprint(...)` dict stored in
        every checkpoint's metadata; None stores nothing.
      num_noise_buckets: see `loss.sft_loss`.
      metrics_logger: Tunix's metrics logger; None builds one from
        `training_config.metrics_logging_options`.
      logits_fn: see `loss.sft_loss`.
    """
    self._fingerprint = None if fingerprint is None else dict(fingerprint)
    super().__init__(model, optimizer, training_config, metrics_logger)
    loss_lib.configure(
        self, config, num_noise_buckets=num_noise_buckets, logits_fn=logits_fn
    )

  def custom_checkpoint_metadata(self) -> dict[str, Any]:
    if self._fingerprint is None:
      return {}
    return {fingerprint_lib.METADATA_KEY: self._fingerprint}

  def _prepare_inputs(self, input_data: Any) -> Any:
    if not isinstance(input_data, Mapping):
      raise ValueError(
          "DiffusionSftTrainer expects dict batches from"
          f" tunix_bd.sft.batching, got {type(input_data).__name__}."
      )
    loss_lib.sft_model_inputs(input_data)  # Fails closed on missing fields.
    if self._mode == "train":
      # A batch split for another k would scale every gradient wrongly.
      expected = self.config.get_with_default("gradient_accumulation_steps", 1)
      steps = np.asarray(input_data[batching.ACCUMULATION_STEPS])
      if (steps != expected).any():
        raise ValueError(
            f"the training batch was split into {np.unique(steps).tolist()}"
            " micro-batches per update, but the trainer has"
            f" gradient_accumulation_steps={expected}; build the batches"
            " with the same gradient_accumulation_steps."
        )
    return input_data

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
