# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The student-rollout source of on-policy distillation (a Tunix `DataHooks`).

Per update step k it rolls the next `GA * B` prompts out at the student's
live weights and serves the step's GA micro-batches (docs/design.md,
"OPD"): a function of (seed, k), so a resume sees the rollouts of an
uninterrupted run. Rolling the whole global batch out at its first
micro-batch is on-policy (no update inside a step); rollouts run in the
trainer's loop thread. Each batch (`OpdBatch`) carries its rows' `Trace` and
the rollout in the `canvases.sequence` layout `[prompt (right-padded to P)
; completion (T)]`, NumPy constants to the loss.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import flax
import jax
import numpy as np

from tunix_bd import compat
from tunix_bd.core import cached_logits
from tunix_bd.core import canvases
from tunix_bd.core import denominators
from tunix_bd.core import diffusion_lm
from tunix_bd.core import eos as eos_lib
from tunix_bd.core import trace as trace_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.generate import denoise
from tunix_bd.sft import corruption as corruption_lib

CORRUPTED = "corrupted"
TRACE = "trace"
CANVASES = (CORRUPTED, TRACE)


@flax.struct.dataclass(frozen=True)
class OpdBatch(compat.DistillationTrainingInput):
  """A micro-batch of rollouts; every array batch-major, NumPy.

  Attributes:
    input_tokens: int32 `[batch, P + T]` clean sequences; in the `corrupted`
      canvas the slots after the first stop of the stop block EOS-filled as
      in SFT (`tunix_bd.core.eos`).
    input_mask: bool `[batch, P + T]` their real tokens.
    positions: int32 `[batch, P + T]` logical positions.
    segment_ids: int32 `[batch, P + T]`, 0 = pad.
    noisy_tokens: int32 `[batch, P + T]`: in the `corrupted` canvas the
      clean rollout re-corrupted like SFT (docs/design.md, "Corruption
      (SFT)"; prompt tokens never), else the clean sequences.
    trace: the rows' rollout as recorded (`prompt_tokens` `[batch, P]`,
      `tokens`, `action_step`, `action_logp` `[batch, T]`, `bd`).
    weights: float32 `[batch, T]`: 1 on generated slots up to and including
      the first stop token (the student learns when to stop; a row that
      never stops weights every generated slot), else 0; in the `corrupted`
      canvas only corrupted slots keep their weight.
    global_weight: float32 `[batch]`; accumulation_steps int32 `[batch]`
      (`tunix_bd.core.denominators`).
  """

  positions: Any = None
  segment_ids: Any = None
  noisy_tokens: Any = None
  trace: trace_lib.Trace | None = None
  weights: Any = None
  global_weight: Any = None
  accumulation_steps: Any = None


def stop_weights(
    tokens: np.ndarray, action_step: np.ndarray, stop_ids: Sequence[int]
) -> np.ndarray:
  """float32 `[batch, T]`: 1 on generated slots up to the first stop."""
  first = eos_lib.first_stop_index(tokens, stop_ids)
  upto = np.arange(tokens.shape[1])[None, :] <= first[:, None]
  return ((np.asarray(action_step) >= 0) & upto).astype(np.float32)


def rollout_batches(
    trace: trace_lib.Trace,
    *,
    step: int,
    canvas: str,
    stop_ids: Sequence[int],
    eos_id: int,
    corruption: corruption_lib.SftCorruptionConfig | None,
    num_micro_batches: int = 1,
) -> list[OpdBatch]:
  """The `num_micro_batches` equal micro-batches of the rolled-out global
  batch (`trace`, concrete) of update `step`, each carrying the global
  batch's total weight. `step` and the row index key the `corrupted` canvas's draws of
  `corruption`; `eos_id` is its fill.
  """
  ints = ("prompt_tokens", "prompt_lengths", "tokens", "action_step")
  trace = trace.replace(
      action_logp=np.asarray(trace.action_logp, np.float32),
      **{k: np.asarray(getattr(trace, k), np.int32) for k in ints},
  )
  rows = canvases.sequence(trace)
  rows = canvases.Sequence(*(np.asarray(x) for x in dataclasses.astuple(rows)))
  width = trace.prompt_tokens.shape[1]
  weights = stop_weights(trace.tokens, trace.action_step, stop_ids)
  count = len(weights)
  clean = noisy = rows.tokens
  if canvas == CORRUPTED:
    # Re-corrupted like SFT (the module docstring); the stop block was
    # committed whole: EOS after the stop, as in SFT.
    block_size = trace.bd.block_size
    clean = np.array(rows.tokens, np.int32)
    completion = clean[:, width:]
    generated = rows.segment_ids[:, width:] > 0
    positions = rows.positions[:, width:]
    first = eos_lib.first_stop_index(completion, stop_ids)
    stopped = first < completion.shape[1]
    stop_position = np.take_along_axis(
        positions, np.minimum(first, completion.shape[1] - 1)[:, None], 1
    )
    fill = (
        generated
        & stopped[:, None]
        & eos_lib.fill_mask(stop_position, positions, block_size)
    )
    completion[:] = np.where(fill, eos_id, completion)
    blocks = positions // block_size
    corrupted = np.zeros(completion.shape, bool)
    for r in range(count):
      # Keyed by (step, global row index).
      rng = np.random.default_rng([
          corruption.seed,
          int(step),
          int(step * count + r),
          corruption_lib.CORRUPTION_STREAM,
      ])
      corrupted[r], _ = corruption_lib.corrupt_blocks(
          rng,
          generated[r],
          blocks[r],
          num_blocks=int(blocks.max()) + 1,
          corruption=corruption,
      )
    noisy = clean.copy()
    noisy[:, width:] = np.where(corrupted, trace.bd.mask_token_id, completion)
    weights = np.where(corrupted, weights, 0.0).astype(np.float32)
  total = float(weights.sum(dtype=np.float64))
  global_batch = OpdBatch(
      input_tokens=clean,
      input_mask=rows.segment_ids > 0,
      teacher_output=None,
      positions=rows.positions,
      segment_ids=rows.segment_ids,
      noisy_tokens=noisy,
      trace=trace,
      weights=weights,
  )
  size = count // num_micro_batches
  return [
      jax.tree.map(
          lambda x, m=m: x[m * size : (m + 1) * size], global_batch
      ).replace(**denominators.batch_fields(total, num_micro_batches, size))
      for m in range(num_micro_batches)
  ]


class StudentRolloutSource(compat.DataHooks):
  """Serves OPD micro-batches rolled out at the student's live weights."""

  def __init__(
      self,
      prompts: prompts_lib.PromptSet,
      *,
      bd,
      decode: denoise.DenoiseConfig,
      canvas: str,
      batch_size: int,
      gradient_accumulation_steps: int,
      max_steps: int,
      seed: int,
      eos_id: int,
      corruption: corruption_lib.SftCorruptionConfig | None = None,
      time_budget_s: float | None = None,
      logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
      cached_logits_fn: diffusion_lm.CachedRowsFn = (
          cached_logits.block_rows_with_cache
      ),
  ):
    """Builds the source (the denoiser is built at the first batch).

    Args:
      prompts: cycled in a per-epoch shuffled order.
      decode: the rollout's denoising settings (temperature > 0 samples).
      batch_size: rows per micro-batch.
      max_steps: updates to serve; then None ends training.
      seed: seeds prompt order, rollout sampling and corruption.
      eos_id: the fill of `corrupted` canvases.
      corruption: the `corrupted` canvas's noise (uniform, not
        complementary).
      time_budget_s: stop at the first update boundary after this many
        seconds of training; None: no limit.
      logits_fn, cached_logits_fn: the student's model calls
        (`denoise.Denoiser`).
    """
    if canvas == CORRUPTED:
      if corruption is None:
        raise ValueError("opd.canvas='corrupted' needs a corruption config.")
      if (
          corruption.complementary
          or corruption.loss_weighting != corruption_lib.UNIFORM
      ):
        raise ValueError(
            "OPD corrupts with uniform weights and no complementary rows; set"
            " corruption.complementary=False, loss_weighting='uniform'."
        )
    self.prompts, self.bd, self.decode = prompts, bd, decode
    self.canvas, self.corruption = canvas, corruption
    self.batch_size, self.accumulation = batch_size, gradient_accumulation_steps
    self.max_steps, self.seed, self.eos_id = max_steps, seed, eos_id
    self.time_budget_s = time_budget_s
    self._model_calls = dict(
        logits_fn=logits_fn, cached_logits_fn=cached_logits_fn
    )
    self._denoiser = None
    self._started = None
    self._step_batches: tuple[int, list[OpdBatch]] | None = None

  def prompt_indices(self, step: int) -> np.ndarray:
    """int `[GA * B]` prompt indices of update `step` (epoch-shuffled)."""
    return prompts_lib.epoch_shuffled_indices(
        len(self.prompts),
        self.accumulation * self.batch_size,
        step,
        seed=self.seed,
        stream=corruption_lib.ORDER_STREAM,
    )

  def rollout_seeds(self, step: int) -> np.ndarray:
    """uint32 `[GA * B]` per-row sampling seeds of update `step`."""
    count = self.accumulation * self.batch_size
    return np.random.SeedSequence([self.seed, step]).generate_state(count)

  def rollout(self, model, step: int) -> denoise.DenoiseOutput:
    """The global batch of update `step`, rolled out at `model`'s weights."""
    if self._denoiser is None:
      self._denoiser = denoise.Denoiser(
          model, bd=self.bd, config=self.decode, **self._model_calls
      )
    index = self.prompt_indices(step)
    return self._denoiser(
        self.prompts.tokens[index],
        self.prompts.lengths[index],
        seeds=self.rollout_seeds(step),
    )

  def load_next_train_batch(self, train_ctx) -> OpdBatch | None:
    step, micro = divmod(train_ctx.iter_steps, self.accumulation)
    if step != train_ctx.train_steps:
      raise ValueError(
          f"the trainer is at micro-batch {train_ctx.iter_steps} but update"
          f" {train_ctx.train_steps}; OPD needs gradient_accumulation_steps="
          f"{self.accumulation} in the trainer too."
      )
    if micro == 0:
      if self._started is None:
        self._started = time.perf_counter()
      elapsed = time.perf_counter() - self._started
      budget = self.time_budget_s
      if step >= self.max_steps or (budget is not None and elapsed > budget):
        return None
      batches = rollout_batches(
          self.rollout(train_ctx.model, step).trace,
          step=step,
          canvas=self.canvas,
          stop_ids=self.decode.stop_ids,
          eos_id=self.eos_id,
          corruption=self.corruption,
          num_micro_batches=self.accumulation,
      )
      self._step_batches = (step, batches)
    if self._step_batches is None or self._step_batches[0] != step:
      raise ValueError(f"no rollout of update {step}; resume mid-step?")
    return self._step_batches[1][micro]

  def load_next_eval_batch(self, train_ctx) -> None:
    del train_ctx  # OPD evaluates by decoding (`evaluation`), not by loss.
    return None
