# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decode evaluation of an OPD student: exact match, tokens per forward, KL.

Tunix evaluates distillation by a loss without a teacher, which says nothing
about decoding, so OPD decodes held-out prompts greedily at each commit
threshold (`prompt_batches.greedy`), scores exact match and tokens per
forward, and measures the mean forward KL(teacher || student) on those
rollouts, each slot on the canvas it was committed from
(`strategy.trace_output`). `DecodeEvaluation` runs it every N update steps
as a Tunix `TrainingHooks` and logs `decode/...` metrics.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from absl import logging
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd.data import prompts as prompts_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.generate import denoise
from tunix_bd.generate import prompt_batches
from tunix_bd.training import metrics as metrics_lib
from tunix_bd.training import progress


@nnx.jit(static_argnames=("strategy",))
def _kl_sums(model, targets, strategy):
  """Weighted sum and weight of each slot's KL on its commit canvas."""
  kl = strategy.slot_stats(strategy.trace_output(model, targets), targets)[0]
  return jnp.sum(targets.batch.weights * kl), jnp.sum(targets.batch.weights)


@dataclasses.dataclass
class DecodeEvaluation(progress.ProgressLines):
  """Greedy decode evaluation at several settings, every N update steps;
  also the run's progress lines (Tunix's trainer holds one hook).

  Attributes:
    prompts: held-out prompts with their answers.
    teacher: the causal teacher (for the KL).
    strategy: the OPD strategy (teacher alignment and temperature).
    decode: the denoising settings, swept by `decode.sweep(thresholds)`.
    thresholds: commit thresholds under the `threshold` rule; KL uses the
      first setting.
    tokenizer: decodes completions for exact match.
    batch_size: prompts per decoding call.
    every_n_steps: evaluate when the update step is a multiple (0: never).
    history: `(step, metrics)` of every evaluation so far.
    description: the progress lines' prefix.
  """

  prompts: prompts_lib.PromptSet
  teacher: Any
  strategy: strategy_lib.DiffusionOpdStrategy
  decode: denoise.DenoiseConfig
  thresholds: Sequence[float]
  tokenizer: Any
  batch_size: int
  every_n_steps: int = 0
  history: list[tuple[int, dict[str, float]]] = dataclasses.field(
      default_factory=list
  )
  description: str = "On-policy distillation"

  def __post_init__(self):
    progress.ProgressLines.__init__(self, self.description)

  def evaluate(self, model) -> dict[str, float]:
    """Metrics of `model` on the prompts (see the module docstring)."""
    kl = np.zeros(2)  # Weighted KL sum and weight, at the first setting.

    def add_kl(out: denoise.DenoiseOutput) -> None:
      (batch,) = sources.rollout_batches(
          out.trace,
          step=0,
          canvas=sources.TRACE,
          stop_ids=self.decode.stop_ids,
          eos_id=self.tokenizer.eos_token_id,
          corruption=None,
      )
      targets = self.strategy.get_teacher_outputs(
          self.teacher, {"batch": batch}
      )
      targets = jax.tree.map(jnp.asarray, targets)
      kl[:] += [
          float(x) for x in _kl_sums(model, targets, strategy=self.strategy)
      ]

    results = prompt_batches.greedy(
        model,
        self.prompts,
        bd=self.strategy.bd,
        decode=self.decode,
        thresholds=self.thresholds,
        tokenizer=self.tokenizer,
        batch_size=self.batch_size,
        on_first_batch=add_kl,
    )
    metrics = prompt_batches.greedy_metrics(results)
    metrics[f"kl@{next(iter(results))}"] = float(kl[0] / max(kl[1], 1e-30))
    return metrics

  def run(self, trainer, step: int) -> dict[str, float]:
    """Evaluates `trainer.model`, logs the metrics and a progress line."""
    metrics = self.evaluate(trainer.model)
    self.history.append((step, metrics))
    for name, value in metrics.items():
      trainer.metrics_logger.log(
          trainer.metrics_prefix, f"decode/{name}", value, "eval", step
      )
    line = f"opd step {step}: " + ", ".join(
        f"{k} {v:.3f}" for k, v in metrics.items()
    )
    logging.info("%s", line)
    print(line, flush=True)
    return metrics

  def before(self, trainer, workdir: str) -> dict[str, float]:
    """The metrics before training: evaluated now, or a resumed run's as
    its first launch logged them at step 0 in `workdir`'s metrics.jsonl
    (it still evaluates its restored step, whose rows were dropped)."""
    step = trainer.train_steps
    now = self.run(trainer, step)
    if not step:
      return now
    prefix = f"{trainer.metrics_prefix}/eval/decode/"
    logged = {
        r["name"][len(prefix) :]: r["value"]
        for r in metrics_lib.read_records(workdir)
        if r["step"] == 0 and r["name"].startswith(prefix)
    }
    return logged if set(logged) == set(now) else now

  def final(self, trainer) -> dict[str, float]:
    """The metrics at `trainer`'s last step, evaluated unless already."""
    step, metrics = self.history[-1]
    if step != trainer.train_steps:
      metrics = self.run(trainer, trainer.train_steps)
    return metrics

  def on_train_step_end(self, train_ctx, train_step, train_loss):
    super().on_train_step_end(train_ctx, train_step, train_loss)
    self._run_if_due(train_ctx)

  def on_train_step_start(self, train_ctx):
    # The step after a checkpoint ends with no hook call (the checkpoint
    # wrote its rows: `aux_metrics.write_metrics_at_checkpoints`): its due
    # evaluation runs at the next step's start.
    super().on_train_step_start(train_ctx)
    self._run_if_due(train_ctx)

  def _run_if_due(self, train_ctx) -> None:
    step = train_ctx.train_steps  # The model is at this step.
    done = {s for s, _ in self.history}
    due = self.every_n_steps and step % self.every_n_steps == 0
    if step and due and step not in done:
      self.run(train_ctx, step)
