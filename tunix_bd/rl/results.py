# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A GRPO run's results: held-out evaluations around its timed training.

The starting policy, the trained one and, when given, a continued-SFT model
are evaluated on the same held-out prompts and seeds (`rl.evaluation`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, Iterable

from tunix_bd.data import prompts as prompts_lib
from tunix_bd.rl import evaluation as evaluation_lib
from tunix_bd.rl import learner as learner_lib
from tunix_bd.rl import report as report_lib
from tunix_bd.rl import settings as settings_lib
from tunix_bd.training import options

Evaluate = Callable[[Any], evaluation_lib.HeldOutResult]


def held_out_evaluation(
    prompts: prompts_lib.PromptSet,
    sources: Any,
    settings: options.EvalSettings,
) -> Evaluate:
  """`model -> HeldOutResult`: `evaluation.evaluate` on fixed prompts,
  with the policy's converted `sources` (`bd`, `decode`, `tokenizer`) and
  the `eval` section's `settings`."""
  return functools.partial(
      evaluation_lib.evaluate,
      prompts=prompts,
      bd=sources.bd,
      decode=sources.decode,
      settings=settings,
      tokenizer=sources.tokenizer,
  )


@dataclasses.dataclass(frozen=True)
class GrpoResults:
  """The held-out evaluations of one run, and how long it trained.

  `continued_sft` is None without `model.continued_sft`; `steps` are the
  actor's update steps once trained; `train_seconds` the wall time of
  `learner.train` alone.
  """

  before: evaluation_lib.HeldOutResult
  after: evaluation_lib.HeldOutResult
  continued_sft: evaluation_lib.HeldOutResult | None
  steps: int
  train_seconds: float

  def write_report(
      self, workdir: str, run: settings_lib.GrpoConfig, kl_reference: str
  ) -> dict[str, Any]:
    """Writes `report.{txt,json,png}` (`report.write_report`); its JSON.

    `kl_reference` says which model the KL reference is
    (`recipes.grpo.kl_reference`).
    """
    return report_lib.write_report(
        workdir,
        before=self.before,
        after=self.after,
        continued_sft=self.continued_sft,
        title=(
            f"{run.description} on block-diffusion rollouts; KL reference:"
            f" {kl_reference}"
        ),
        caption=report_lib.caption(run, self.steps, self.train_seconds),
        extra={
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            "kl_reference": kl_reference,
        },
    )


def train_and_evaluate(
    cluster: Any,
    learner: Any,
    batches: Iterable[Any],
    evaluate: Evaluate,
    *,
    before: evaluation_lib.HeldOutResult,
    continued_sft: Callable[[], Any] | None = None,
) -> GrpoResults:
  """Trains on `batches`, timed, then evaluates as `before` was.

  Every item is checked as it is read (`learner.check_dataset_item`), and a
  run resumed at `max_steps` trains no further, whichever the learner.
  `continued_sft` loads the continued-SFT model to evaluate beside it.
  """
  started = time.perf_counter()
  actor = cluster.actor_trainer
  if actor.train_steps < cluster.cluster_config.training_config.max_steps:
    learner.train(learner_lib.checked(batches, "train dataset"))
  train_seconds = time.perf_counter() - started
  after = evaluate(cluster.actor_trainer.model)
  continued = evaluate(continued_sft()) if continued_sft else None
  return GrpoResults(
      before=before,
      after=after,
      continued_sft=continued,
      steps=cluster.actor_trainer.train_steps,
      train_seconds=train_seconds,
  )
