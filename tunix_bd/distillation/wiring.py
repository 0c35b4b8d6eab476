# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Builds the on-policy distillation trainer from the checked sections.

The strategy, the student-rollout source, the decode evaluation (paced by
`train.eval_every_n_steps`) and the `OpdTrainer` that runs them
(docs/design.md, "OPD").

`OpdTrainer` is Tunix's `DistillationTrainer` with only what 0.1.7 lacks:
the student-rollout source as its data hooks, the `{"batch": batch}` model
input that makes the strategy receive the raw rollout batch, logging of the
strategy's aux metrics (reduced over the micro-batches of a step like
SFT's), and the run fingerprint in every checkpoint. Training runs with at
most one computation in flight (`max_inflight_computations=1`), which
bounds the dense `[batch, T, vocab]` teacher log-probs held at once.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax

from tunix_bd import compat
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import aux_metrics
from tunix_bd.training import options


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
      training_config: Tunix's config; its gradient accumulation must equal
        the source's, and `max_inflight_computations` must be 1.
      fingerprint: stored in every checkpoint's metadata.
      training_hooks: e.g. the decode evaluation.
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


def train_and_eval_prompts(
    student_sources: Any, data: Any, max_prompt_length: int
) -> tuple[prompts_lib.PromptSet, prompts_lib.PromptSet]:
  """The `data` section's train and held-out prompts, as the student reads.

  Rendered as the student was trained to (its export's chat switches) and
  encoded with its tokenizer; every prompt is checked before any compute.

  Args:
    student_sources: the student's converted sources
      (`run.sources.ConvertedSources`: its `tokenizer`, `chat_options`).
    data: the `data` section (`dataset.conversations`); a conversation's
      last assistant turn is re-generated.
    max_prompt_length: `rollout.max_prompt_length`.
  """
  train, held_out = dataset_lib.conversations(data)
  return tuple(
      student_sources.encode_prompts(conversations, max_prompt_length)
      for conversations in (train, held_out)
  )


def build_trainer(
    student: Any,
    teacher: Any,
    *,
    student_sources: Any,
    train_prompts: prompts_lib.PromptSet,
    eval_prompts: prompts_lib.PromptSet,
    opd: settings_lib.OpdSettings,
    train: options.TrainSettings,
    corruption: corruption_lib.SftCorruptionConfig,
    eval_settings: Any,
    mesh: jax.sharding.Mesh,
    workdir: str,
    seed: int,
    logits_chunk: int | None = None,
    fingerprint: Mapping[str, Any] | None = None,
) -> tuple[OpdTrainer, evaluation_lib.DecodeEvaluation]:
  """`(trainer, evaluation)` of an OPD run, its checkpoint (if any) restored.

  Args:
    teacher: the causal teacher (frozen), checked against the student.
    student_sources: the student's converted sources
      (`run.sources.ConvertedSources`): its block-diffusion settings `bd`,
      denoising settings `decode` (rollouts and evaluation) and `tokenizer`.
    train_prompts: the prompts the student rolls out on.
    eval_prompts: the held-out prompts with their answers.
    opd, train, corruption, eval_settings: the checked `opd`, `train`
      (with its time budget), `corruption` and `eval` sections
      (`eval`: a `training.options.EvalSettings`).
    workdir: the run directory (checkpoints, metrics).
    seed: `config.seed`, for the rollouts.
    logits_chunk: `model.precision.chunk`.
    fingerprint: stored in every checkpoint's metadata.
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
        training_hooks=evaluation,
    )
  return trainer, evaluation
