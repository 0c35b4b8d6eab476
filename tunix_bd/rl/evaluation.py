# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Held-out evaluation of a block-diffusion policy, paired before and after.

Greedy exact match and tokens per forward at each `eval.thresholds` (under
`rollout.rule=threshold`; another rule at its own parameter), and sampled
exact match (`eval.sampled_*`) with the same seeds and prompts whichever
weights are evaluated. Per-prompt results are kept, so a change is reported
with its standard error clustered by prompt (`paired_difference`): a
prompt's samples share its difficulty, so they are not independent draws.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from tunix_bd.data import prompts as prompts_lib
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.generate import prompt_batches
from tunix_bd.training import options

SAMPLED = "sampled_exact_match"


def sample_seeds(num_prompts: int, num_samples: int, seed: int) -> np.ndarray:
  """int64 `[num_samples, num_prompts]`: `seed + s * num_prompts + i`."""
  seeds = seed + np.arange(num_samples * num_prompts, dtype=np.int64)
  if seeds.size and seeds[-1] >= 2**32:
    raise ValueError(
        f"eval.seed={seed} is too large: sample seeds must stay below 2**32."
    )
  return seeds.reshape(num_samples, num_prompts)


@dataclasses.dataclass(frozen=True)
class HeldOutResult:
  """One model's held-out evaluation.

  Attributes:
    greedy: each setting's label (`prompt_batches.greedy`) -> its greedy
      `prompt_batches.DecodeResult`.
    sampled_correct: bool `[num_prompts, sampled_samples]`.
    sampled_tokens_per_forward: float `[num_prompts, sampled_samples]`.
    sampled_setting: how the samples were drawn, for reports.
  """

  greedy: dict[str, prompt_batches.DecodeResult]
  sampled_correct: np.ndarray
  sampled_tokens_per_forward: np.ndarray
  sampled_setting: str = ""

  def to_json(self) -> dict[str, Any]:
    """The metrics (`exact_match@L`, `final_answer@L`, `tokens_per_forward@L`,
    `sampled_exact_match`) and the per-prompt results (to pair runs with)."""
    metrics = prompt_batches.greedy_metrics(self.greedy)
    if self.sampled_correct.size:
      metrics[SAMPLED] = float(np.mean(self.sampled_correct))
    return {
        "metrics": metrics,
        "greedy_correct": {
            label: d.correct.astype(int).tolist()
            for label, d in self.greedy.items()
        },
        "greedy_final_correct": {
            label: d.final_correct.astype(int).tolist()
            for label, d in self.greedy.items()
            if d.final_correct is not None
        },
        "sampled_correct": self.sampled_correct.astype(int).tolist(),
    }


def evaluate(
    model: Any,
    prompts: prompts_lib.PromptSet,
    *,
    bd: Any,
    decode: denoise.DenoiseConfig,
    settings: options.HeldOutEval,
    tokenizer: Any,
) -> HeldOutResult:
  """Greedy and sampled held-out evaluation of the first
  `settings.num_prompts` prompts; `decode` is the rollout's denoising
  settings, swept per measurement (`CommitSettings.sweep`)."""
  num = settings.num_prompts  # At most len(prompts): `rl.prompt_stream`.
  prompts = dataclasses.replace(
      prompts,
      tokens=prompts.tokens[:num],
      lengths=prompts.lengths[:num],
      answers=prompts.answers[:num] if prompts.answers else None,
  )
  common = dict(bd=bd, tokenizer=tokenizer, batch_size=settings.batch_size)
  greedy = prompt_batches.greedy(
      model, prompts, decode=decode, thresholds=settings.thresholds, **common
  )
  (sampled_config,) = decode.sweep(
      (settings.sampled_threshold,), temperature=settings.sampled_temperature
  )
  samples = [
      prompt_batches.decode_prompts(
          model, prompts=prompts, config=sampled_config, seeds=seeds, **common
      )
      for seeds in sample_seeds(num, settings.sampled_samples, settings.seed)
  ]
  # `[samples, num]` transposed to `[num, samples]`, also without samples.
  correct = np.reshape([s.correct for s in samples], (-1, num)).astype(bool)
  speed = np.reshape([s.tokens_per_forward for s in samples], (-1, num))
  return HeldOutResult(
      greedy=greedy,
      sampled_correct=correct.T,
      sampled_tokens_per_forward=speed.T,
      sampled_setting=(
          f"T={settings.sampled_temperature:g},"
          f" {commit_rules.describe(sampled_config.label())},"
          f" {len(samples)} per prompt"
      ),
  )


@dataclasses.dataclass(frozen=True)
class PairedDifference:
  """A before -> after change on the same prompts: the two means, `delta =
  after - before` and `se`, its standard error clustered by prompt."""

  before: float
  after: float
  delta: float
  se: float


def paired_difference(
    before: np.ndarray, after: np.ndarray
) -> PairedDifference:
  """The change of a per-sample score, with its SE clustered by prompt.

  `before` and `after` are `[num_prompts]` or `[num_prompts, samples]`
  scores, paired by prompt and seed. With `d_i` prompt `i`'s mean of `after
  - before`, `se = std(d, ddof=1) / sqrt(num_prompts)`, the cluster-robust
  SE for equal-size clusters.
  """
  before = np.asarray(before, np.float64)
  after = np.asarray(after, np.float64)
  if before.shape != after.shape or before.ndim not in (1, 2):
    raise ValueError(
        "before and after must have one shape, [num_prompts] or"
        f" [num_prompts, samples]; got {before.shape} and {after.shape}."
    )
  if before.shape[0] < 2 or not before.size:
    raise ValueError(
        f"a paired SE needs >= 2 prompts with samples, got {before.shape}."
    )
  per_prompt = (after - before).reshape(before.shape[0], -1).mean(axis=1)
  return PairedDifference(
      before=float(before.mean()),
      after=float(after.mean()),
      delta=float(per_prompt.mean()),
      se=float(per_prompt.std(ddof=1) / math.sqrt(per_prompt.size)),
  )


def compare(
    before: HeldOutResult, after: HeldOutResult
) -> dict[str, PairedDifference]:
  """Every metric's paired change, keyed as `to_json`'s metrics; a
  ValueError if the two were not evaluated alike."""
  if list(before.greedy) != list(after.greedy):
    raise ValueError(
        f"greedy settings differ: {list(before.greedy)} vs"
        f" {list(after.greedy)}."
    )
  changes = {}
  for label, b in before.greedy.items():
    a = after.greedy[label]
    changes[f"exact_match@{label}"] = paired_difference(b.correct, a.correct)
    if b.final_correct is not None:
      changes[f"final_answer@{label}"] = paired_difference(
          b.final_correct, a.final_correct
      )
    changes[f"tokens_per_forward@{label}"] = paired_difference(
        b.tokens_per_forward, a.tokens_per_forward
    )
  if before.sampled_correct.size or after.sampled_correct.size:
    changes[SAMPLED] = paired_difference(
        before.sampled_correct, after.sampled_correct
    )
  return changes
