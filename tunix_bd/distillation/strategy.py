# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionOpdStrategy`: forward KL from a causal teacher on student rollouts.

A Tunix distillation `BaseStrategy` for `DistillationTrainer` (docs/design.md,
"OPD"). Tunix 0.1.7 rebuilds every batch as a plain `TrainingInput` before
the jitted step, dropping other fields, so `get_teacher_outputs` (eager,
outside the gradient) returns an `OpdTargets` holding the teacher's view
AND the student's inputs; the loss reads only `teacher_output`.

With `logits_chunk` the targets hold the teacher's rows (hidden rows and
head), and the loss applies both heads chunk by chunk (`chunked_kl`): no
`[batch, T, vocab]` array of either model exists.
"""

from __future__ import annotations

from typing import Any

import flax
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import compat
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import cached_logits
from tunix_bd.core import denominators
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import replay
from tunix_bd.core import scoring
from tunix_bd.distillation import chunked_kl
from tunix_bd.distillation import sources
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.sft import loss as sft_loss


@flax.struct.dataclass(frozen=True)
class OpdTargets:
  """What the jitted step sees of a micro-batch (all batch-major).

  Attributes:
    batch: the micro-batch (`sources.OpdBatch`; its trace's `bd` is the
      strategy's).
    teacher_logp: float32 `[batch, T, vocab]` teacher log-probs at `tau`
      (dense), or None.
    teacher_rows: the teacher's aligned `lm_head.Rows` `[batch, T,
      teacher_embed]` (chunked), or None.
  """

  batch: sources.OpdBatch
  teacher_logp: Any = None
  teacher_rows: Any = None


def forward_kl(teacher_logp: jax.Array, student_logp: jax.Array) -> jax.Array:
  """float32 `[...]` KL(teacher || student) over the last axis; entries
  where the teacher has probability 0 (excluded ids) add 0."""
  p = jnp.exp(teacher_logp)
  terms = jnp.where(p > 0, p * (teacher_logp - student_logp), 0.0)
  return jnp.sum(terms, axis=-1)


@nnx.jit(static_argnames=("prompt_width",))
def _teacher_hidden(teacher, tokens, positions, segment_ids, *, prompt_width):
  """`[batch, T, teacher_embed]` the teacher's target-aligned hidden rows,
  which its head maps to `teacher_lib.aligned_logits` (no head compiled)."""
  rows = diffusion_lm.diffusion_rows(
      teacher,
      tokens,
      positions,
      segment_ids,
      config=teacher_lib.ar_config(0),  # The mask id is the head's to exclude.
  )
  return rows.values[:, prompt_width:]


class DiffusionOpdStrategy(compat.BaseStrategy):
  """On-policy distillation of a causal teacher into a block-diffusion LM."""

  def __init__(
      self,
      *,
      bd: bd_config_lib.BlockDiffusionConfig,
      vocab_size: int,
      canvas: str = sources.CORRUPTED,
      temperature: float = 1.0,
      hard_loss_weight: float = 0.0,
      logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
      cached_logits_fn: diffusion_lm.CachedRowsFn = (
          cached_logits.block_rows_with_cache
      ),
      logits_chunk: int | None = None,
  ):
    """Builds the strategy; `canvas`, `temperature` and `hard_loss_weight`
    are the `opd` section's, `bd` and `vocab_size` the student's.

    Args:
      logits_fn: the student's cache-free model call (`corrupted` canvas).
      cached_logits_fn: the student's cached model call (`trace` canvas).
      logits_chunk: None for dense logits; an int applies both models' heads
        this many vocabulary columns at a time.
    """
    # `OpdSettings` checked `opd.canvas` and `opd.hard_loss_weight`.
    self.temperature = scoring.check_temperature(temperature, "opd.temperature")
    self.bd, self.canvas, self.vocab_size = bd, canvas, vocab_size
    self.hard_loss_weight = float(hard_loss_weight)
    self.logits_fn = logits_fn
    self.cached_logits_fn = cached_logits_fn
    self.logits_chunk = lm_head.check_chunk(logits_chunk)
    super().__init__(
        student_forward_fn=self.student_rows,
        teacher_forward_fn=self._teacher_log_probs,
        labels_fn=lambda **_: None,
    )

  def _teacher_log_probs(
      self, teacher, tokens, positions, segment_ids, completion
  ):
    # `BaseStrategy` jits this. Only the completion columns are normalized,
    # so the step holds `[batch, T, vocab]`, not `[batch, length, vocab]`.
    logits = teacher_lib.aligned_logits(
        teacher,
        tokens,
        positions,
        segment_ids,
        vocab_size=self.vocab_size,
        mask_token_id=self.bd.mask_token_id,
    )
    prompt_width = tokens.shape[1] - completion.shape[1]
    return scoring.log_probs(logits[:, prompt_width:], self.temperature)

  def get_teacher_outputs(self, teacher_model, inputs) -> OpdTargets:
    """The teacher's view of the clean rollouts (log-probs, or chunked its
    rows), plus the student's inputs."""
    batch = inputs["batch"]
    # Fails closed on a batch the loss would misread (eager, no compute).
    if not isinstance(batch, sources.OpdBatch):
      raise ValueError(
          "DiffusionOpdStrategy needs OpdBatch micro-batches from"
          f" StudentRolloutSource, got {type(batch).__name__}; set the"
          " trainer's gen_model_input_fn to `lambda batch: {'batch':"
          " batch}`."
      )
    if batch.trace.bd != self.bd:
      raise ValueError(
          f"the rollout's bd {batch.trace.bd} differs from the strategy's"
          f" {self.bd}; the student must roll out with the settings it is"
          " trained under."
      )
    # `sources.rollout_batches` weights only generated slots, with 0 or 1;
    # a batch from elsewhere is checked here, before the teacher runs (a NaN
    # weight would make the loss NaN, a negative one ascend the KL).
    weights = np.asarray(batch.weights)
    if not (np.isfinite(weights) & (weights >= 0)).all():
      raise ValueError("OPD weights must be finite and >= 0.")
    if (weights[np.asarray(batch.trace.action_step) < 0] != 0).any():
      raise ValueError("OPD weights must be 0 on slots never generated.")
    same_position = self.bd.alignment == bd_config_lib.SAME_POSITION
    width = np.shape(batch.trace.prompt_tokens)[1]
    if self.canvas == sources.CORRUPTED and same_position:
      visible = (
          np.asarray(batch.noisy_tokens)[:, width:] != self.bd.mask_token_id
      )
      if ((weights > 0) & visible).any():
        raise ValueError(
            "alignment='same_position' scores a slot from its own canvas"
            " position, but weighted slots are uncorrupted (the student would"
            " see its target); weight only corrupted slots."
        )
    args = (
        teacher_model,
        jnp.asarray(batch.input_tokens),
        jnp.asarray(batch.positions),
        jnp.asarray(batch.segment_ids),
    )
    teacher_logp = teacher_rows = None
    if self.logits_chunk:
      # The mask id is excluded where it is in the teacher's vocabulary; the
      # one SFT added past it is the student's (`distill_stats` checks it).
      head = lm_head.split_head(teacher_model)
      if head is None:
        raise ValueError(
            "the teacher gives no hidden states apart from its head (LoRA on"
            " its head, or a Tunix model without them); set"
            " model.logits_chunk=0."
        )
      if self.bd.mask_token_id < head.vocab_size:
        head = lm_head.model_head(teacher_model, self.bd.mask_token_id)
      hidden = _teacher_hidden(*args, prompt_width=width)
      teacher_rows = lm_head.Rows(hidden, head)
    else:
      teacher_logp = self._teacher_forward_fn(
          *args, jnp.asarray(batch.trace.tokens)
      )
    targets = OpdTargets(batch, teacher_logp, teacher_rows)
    return jax.tree.map(jax.lax.stop_gradient, targets)

  def student_rows(self, model, targets: OpdTargets) -> Any:
    """The student's `lm_head.Rows` `[batch, T, ...]` at the completion
    slots."""
    if self.canvas == sources.TRACE:
      return self.trace_output(model, targets)
    rows = sft_loss.sft_rows(
        model,
        tokens=targets.batch.input_tokens,
        noisy_tokens=targets.batch.noisy_tokens,
        positions=targets.batch.positions,
        segment_ids=targets.batch.segment_ids,
        config=self.bd,
        logits_fn=self.logits_fn,
    )
    width = targets.batch.trace.prompt_tokens.shape[1]
    return rows.map(lambda x: x[:, width:])

  def trace_output(self, model, targets: OpdTargets) -> Any:
    """`student_rows` on the `trace` canvas, each slot's commit canvas
    (`core.replay`; slots never generated get 0 rows and weight 0)."""
    return replay.replay_rows(
        model, targets.batch.trace, cached_logits_fn=self.cached_logits_fn
    )

  def slot_stats(self, student_output, targets: OpdTargets):
    """Per slot `(kl, hard_nll, teacher_nll, agree)`, dense or chunked."""
    tau = self.temperature
    if self.logits_chunk:
      stats = chunked_kl.distill_stats(
          student_output,
          targets.teacher_rows,
          targets.batch.trace.tokens,
          temperature=tau,
          chunk=self.logits_chunk,
      )
      return tuple(stats[k] for k in ("kl", "hard_nll", "teacher_nll", "agree"))
    student_output = lm_head.dense_logits(student_output)
    student_logp = scoring.log_probs(student_output, tau)
    kl = forward_kl(targets.teacher_logp, student_logp)
    teacher_argmax = jnp.argmax(targets.teacher_logp, axis=-1)
    hard = -scoring.token_log_probs(student_output, teacher_argmax)
    teacher_nll = -jnp.take_along_axis(
        targets.teacher_logp, targets.batch.trace.tokens[..., None], axis=-1
    )[..., 0]
    agree = jnp.argmax(student_logp, axis=-1) == teacher_argmax
    return kl, hard, teacher_nll, agree

  def compute_loss(self, student_output, teacher_output, labels):
    """`(loss, aux)` of the student's output (`student_rows`; see module)."""
    del labels
    targets, tau = teacher_output, self.temperature
    weights = targets.batch.weights.astype(jnp.float32)
    kl, hard, teacher_nll, agree = self.slot_stats(student_output, targets)
    scale = denominators.loss_scale(
        targets.batch.global_weight, targets.batch.accumulation_steps
    )
    kl_sum = jnp.sum(weights * kl)
    loss = tau**2 * kl_sum * scale
    hard_sum = jnp.sum(weights * hard)
    if self.hard_loss_weight:
      loss = loss + self.hard_loss_weight * hard_sum * scale
    scored = weights > 0
    agree = scored & agree
    total = jnp.sum(weights)
    count = jnp.sum(scored, dtype=jnp.float32)
    aux = {
        "kl": jnp.stack([kl_sum, total]),
        "hard_ce": jnp.stack([hard_sum, total]),
        "teacher_nll_of_student_tokens": jnp.stack(
            [jnp.sum(jnp.where(scored, teacher_nll, 0.0)), count]
        ),
        "argmax_agreement": jnp.stack(
            [jnp.sum(agree, dtype=jnp.float32), count]
        ),
        "weighted_tokens": total,
    }
    return loss, jax.tree.map(jax.lax.stop_gradient, aux)

  def get_train_loss(self, student_model, teacher_output, inputs):
    del inputs  # Dropped by Tunix; everything rides in `teacher_output`.
    rows = self.student_rows(student_model, teacher_output)
    return self.compute_loss(rows, teacher_output, None)

  def compute_eval_loss(self, student_output, labels):
    # Unreached: the source serves no eval batches.
    raise ValueError(
        "OPD has no loss evaluation (Tunix evaluates without a teacher); it"
        " evaluates by decoding (`tunix_bd.distillation.evaluation`)."
    )
