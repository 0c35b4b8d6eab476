# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`OpdTrainer`: Tunix's `DistillationTrainer` wired for on-policy distillation.

It adds only what 0.1.7 lacks: the student-rollout source as its data hooks,
the `{"batch": batch}` model input that makes the strategy receive the raw
rollout batch, logging of the strategy's aux metrics (reduced over the
micro-batches of a step like SFT's), and the run fingerprint in every
checkpoint. Training runs with at most one computation in flight
(`max_inflight_computations=1`), which bounds the dense `[batch, T, vocab]`
teacher log-probs held at once.
"""

from __future__ import annotations

from typing import Any, Mapping

from tunix_bd import compat
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.training import aux_metrics


def model_inputs(batch: Any) -> dict[str, Any]:
  """The `gen_model_input_fn`: the whole batch, as the strategy's input."""
  return {"batch": batch}


class OpdTrainer(aux_metrics.AuxMetricsMixin, compat.DistillationTrainer):
  """A `DistillationTrainer` over a `StudentRolloutSource`."""

  def __init__(
      self,
      student_model,
      teacher_model,
      strategy: strategy_lib.DiffusionOpdStrategy,
      optimizer,
      training_config: compat.DistillationTrainingConfig,
      *,
      source: sources.StudentRolloutSource,
      fingerprint: Mapping[str, Any] | None = None,
      training_hooks=None,
  ):
    """Builds the trainer; a checkpoint in its directory is restored.

    Args:
      student_model: the block-diffusion student (trained).
      teacher_model: the causal teacher (frozen).
      strategy: the OPD strategy.
      optimizer: an optax optimizer.
      training_config: Tunix's config; its gradient accumulation must equal
        the source's, and `max_inflight_computations` must be 1.
      source: the student-rollout source.
      fingerprint: stored in every checkpoint's metadata.
      training_hooks: e.g. the decode evaluation.

    Raises:
      ValueError: for a config that disagrees with the source.
    """
    accumulation = training_config.gradient_accumulation_steps or 1
    if accumulation != source.accumulation:
      raise ValueError(
          f"the trainer's gradient_accumulation_steps={accumulation} differs"
          f" from the source's {source.accumulation}."
      )
    if training_config.max_inflight_computations != 1:
      raise ValueError(
          "OPD holds dense teacher log-probs per step; set"
          " max_inflight_computations=1."
      )
    self._set_fingerprint(fingerprint)
    super().__init__(
        student_model, teacher_model, strategy, optimizer, training_config
    )
    self.with_gen_model_input_fn(model_inputs)
    self.with_data_hooks(source)
    if training_hooks is not None:
      self.with_training_hooks(training_hooks)

  def run(self) -> None:
    """Trains until the source ends (max steps or time budget)."""
    # The data hooks serve every batch; the iterable is never read.
    self.train([], None)
