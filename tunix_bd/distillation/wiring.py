# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Builds the on-policy distillation trainer from the checked sections.

The strategy, the student-rollout source, the decode evaluation (paced by
`train.eval_every_n_steps`) and the `OpdTrainer` that runs them
(docs/design.md, "OPD"). `OpdTrainer` is Tunix's `DistillationTrainer` with
what 0.1.7 lacks: the source as its data hooks, the raw rollout batch as
the strategy's input, the strategy's aux metrics, the run fingerprint in
every checkpoint; at most one computation in flight, which bounds the dense
`[batch, T, vocab]` teacher log-probs held at once.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax

from tunix_bd import compat
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import aux_metrics
from tunix_bd.training import options


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
  ):
    """Builds the trainer (restoring a checkpoint in its directory);
    `training_config` must have the source's gradient accumulation and
    `max_inflight_computations=1`."""
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
    super().__init__(
        student_model,
        teacher_model,
        strategy,
        optimizer,
        training_config,
        fingerprint=fingerprint,
    )
    # The whole batch is the strategy's input.
    self.with_gen_model_input_fn(lambda batch: {"batch": batch})
    self.with_data_hooks(source)

  def run(self) -> None:
    """Trains until the source ends (max steps or time budget)."""
    # The data hooks serve every batch; the iterable is never read.
    self.train([], None)


def build_trainer(
    student: Any,
    teacher: Any,
    *,
    student_sources: Any,
    train_prompts: prompts_lib.PromptSet,
    eval_prompts: prompts_lib.PromptSet,
    opd: settings_lib.OpdSettings,
    train: options.TimedTrain,
    corruption: corruption_lib.SftCorruptionConfig,
    eval_settings: Any,
    mesh: jax.sharding.Mesh,
    workdir: str,
    seed: int,
    logits_chunk: int | None = None,
    fingerprint: Mapping[str, Any] | None = None,
) -> tuple[OpdTrainer, evaluation_lib.DecodeEvaluation]:
  """`(trainer, evaluation)` of an OPD run, its checkpoint (if any) restored.

  `student_sources` are the student's `run.sources.ConvertedSources`;
  `opd`, `train`, `corruption` and `eval_settings` the checked sections;
  `seed` is `config.seed` and `logits_chunk` `model.chunk`.
  """
  bd, decode = student_sources.bd, student_sources.decode
  tokenizer = student_sources.tokenizer
  strategy = strategy_lib.DiffusionOpdStrategy(
      bd=bd,
      vocab_size=student.config.vocab_size,
      canvas=opd.canvas,
      temperature=opd.temperature,
      hard_loss_weight=opd.hard_loss_weight,
      logits_chunk=logits_chunk,
  )
  source = sources.StudentRolloutSource(
      train_prompts,
      bd=bd,
      decode=decode,
      canvas=opd.canvas,
      batch_size=train.batch_size,
      gradient_accumulation_steps=train.gradient_accumulation_steps or 1,
      max_steps=train.max_steps,
      seed=seed,
      eos_id=tokenizer.eos_token_id,
      corruption=corruption,
      time_budget_s=train.seconds,
  )
  description = f"On-policy distillation ({opd.canvas})"
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=eval_prompts,
      teacher=teacher,
      strategy=strategy,
      decode=decode,
      thresholds=eval_settings.thresholds,
      tokenizer=tokenizer,
      batch_size=eval_settings.batch_size,
      every_n_steps=train.eval_every_n_steps,
      description=description,
  )
  # The source serves no eval batches, so Tunix runs no loss evaluation;
  # `train.eval_every_n_steps` paces the decode evaluation instead.
  training_config = options.training_config(train, workdir, description)
  training_config.max_inflight_computations = 1
  with mesh_lib.tunix_context(mesh):
    trainer = OpdTrainer(
        student,
        teacher,
        strategy,
        options.optimizer(train),
        training_config,
        source=source,
        fingerprint=fingerprint,
    )
  trainer.with_training_hooks(evaluation)
  return trainer, evaluation
