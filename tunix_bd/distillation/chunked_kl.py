# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""OPD's per-slot statistics from hidden rows, in vocabulary chunks.

`DiffusionOpdStrategy`'s loss reads, per completion slot, the forward
KL(p_teacher^tau || p_student^tau), the student's cross-entropy of the
teacher's argmax, the teacher's NLL of the rollout's token and whether both
argmaxes agree. `distill_stats` computes all four from the student's and
the teacher's rows (`core.lm_head.Rows`), one chunk of both vocabularies at
a time, in one pass with online normalizers:

    KL = sum_v p_t (t_v - s_v) - lse(t) + lse(s)
       = A / Z_t - lse(t) + lse(s),  A = sum_v exp(t_v - m_t) (t_v - s_v)

(t, s the tempered logits, `m_t` the teacher's running max, `Z_t` its
running sum), so no `[slots, vocab]` array of either model is built and the
backward pass recomputes a chunk's logits. The values equal the dense
`strategy.forward_kl` path to float rounding (`distillation_strategy_test`).

The teacher may lack the student's extra ids (the mask token SFT added):
the chunks cover the teacher's vocabulary, and the student's ids past it
enter the student's normalizers and argmax once, after them (a head's must
be excluded ones: probability 0 on both sides, as the dense path's
`MASKED_LOGIT` padding gives them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import scoring

MASKED_LOGIT = diffusion_lm.MASKED_LOGIT


def distill_stats(
    student: lm_head.Rows,
    teacher: lm_head.Rows,
    completion: jax.Array,
    *,
    temperature: float,
    chunk: int = lm_head.DEFAULT_CHUNK,
) -> dict[str, jax.Array]:
  """Per-slot OPD statistics from rows, chunk by chunk.

  Args:
    student: `[..., width]` student rows (differentiated); its ids past the
      teacher's vocabulary must be excluded ones.
    teacher: `[..., teacher_width]` teacher rows, same leading shape.
    completion: int `[...]` the rollout's tokens.
    temperature: tau of the KL and the teacher's NLL (static, > 0).
    chunk: vocabulary columns per chunk.

  Returns:
    float32 `[...]` `kl` (KL(p_t^tau || p_s^tau)), `hard_nll` (-log
    p_student(argmax teacher) at temperature 1), `teacher_nll` (-log
    p_teacher^tau(completion)) and bool `agree` (equal argmaxes). Only `kl`
    and `hard_nll` carry gradients.
  """
  # The student may only add excluded ids to the teacher's vocabulary (an
  # injected call's logits exclude its mask column by contract).
  extra = set(range(teacher.vocab_size, student.vocab_size))
  excluded = () if student.head is None else student.head.excluded
  if teacher.vocab_size > student.vocab_size or (
      student.head is not None and extra - set(excluded)
  ):
    raise ValueError(
        f"the teacher's head has {teacher.vocab_size} ids and the student's"
        f" {student.vocab_size} (excluded {list(excluded)}); the"
        " student may only add excluded ids (its mask token)."
    )
  rows = completion.shape
  if student.values.shape[:-1] != rows or teacher.values.shape[:-1] != rows:
    raise ValueError(
        f"rows {student.values.shape[:-1]} (student),"
        f" {teacher.values.shape[:-1]} (teacher) and completion {rows} differ."
    )
  tau = scoring.check_temperature(temperature, "opd.temperature")
  chunks = lm_head.chunks_of(teacher.vocab_size, chunk)
  completion = completion.astype(jnp.int32)
  teacher = jax.lax.stop_gradient(teacher)

  def body(carry, i):
    (ms, zs), (ms1, zs1), (mt, zt, a), teacher_best, student_best, picks = carry
    start, valid = chunks.start(i), chunks.valid(i)
    columns = start + jnp.arange(chunks.size)
    masked = lambda x: jnp.where(valid, x, MASKED_LOGIT)
    s = masked(lm_head.chunk_logits(student, start, chunks.size))
    t = masked(lm_head.chunk_logits(teacher, start, chunks.size))
    s_tau = scoring.scale_logits(s, tau)
    t_tau = scoring.scale_logits(t, tau)
    ms, zs = lm_head.online_logsumexp(ms, zs, s_tau)
    ms1, zs1 = lm_head.online_logsumexp(ms1, zs1, s)
    # The teacher's running sums, and A of the module docstring with them.
    mt_new = jnp.maximum(mt, jnp.max(t_tau, axis=-1))
    rescale = jnp.exp(mt - mt_new)
    weight = jnp.exp(t_tau - mt_new[..., None])
    zt = zt * rescale + jnp.sum(weight, axis=-1)
    a = a * rescale + jnp.sum(weight * (t_tau - s_tau), axis=-1)
    # The teacher's argmax, and the student's logit there (the hard target).
    best_t, index_t, s_at = teacher_best
    local = jnp.argmax(t, axis=-1)
    value = jnp.max(t, axis=-1)
    better = value > best_t
    s_here = jnp.take_along_axis(s, local[..., None], axis=-1)[..., 0]
    teacher_best = (
        jnp.where(better, value, best_t),
        jnp.where(better, start + local.astype(jnp.int32), index_t),
        jnp.where(better, s_here, s_at),
    )
    student_best = lm_head.running_argmax(
        *student_best, jax.lax.stop_gradient(s), start
    )
    is_token = valid & (columns == completion[..., None])
    picks += jnp.sum(jnp.where(is_token, t_tau, 0.0), axis=-1)
    return (
        (ms, zs),
        (ms1, zs1),
        (mt_new, zt, a),
        teacher_best,
        student_best,
        picks,
    )

  low = jnp.full(rows, MASKED_LOGIT, jnp.float32)
  zeros = jnp.zeros(rows, jnp.float32)
  none = jnp.full(rows, -jnp.inf, jnp.float32)
  index = jnp.zeros(rows, jnp.int32)
  init = (
      (low, zeros),
      (low, zeros),
      (low, zeros, zeros),
      (none, index, zeros),
      (none, index),
      zeros,
  )
  (ms, zs), (ms1, zs1), (mt, zt, a), teacher_best, student_best, picks = (
      lm_head.scan_chunks(body, init, chunks)
  )
  if student.vocab_size > teacher.vocab_size:
    # The student's ids past the teacher's (probability 0 for the teacher)
    # still count in the student's normalizers and argmax, as densely.
    start = teacher.vocab_size
    s = lm_head.chunk_logits(student, start, student.vocab_size - start)
    ms, zs = lm_head.online_logsumexp(ms, zs, scoring.scale_logits(s, tau))
    ms1, zs1 = lm_head.online_logsumexp(ms1, zs1, s)
    student_best = lm_head.running_argmax(
        *student_best, jax.lax.stop_gradient(s), start
    )
  lse_teacher = mt + jnp.log(zt)
  _, teacher_argmax, s_at = teacher_best
  return {
      "kl": a / zt - lse_teacher + ms + jnp.log(zs),
      "hard_nll": ms1 + jnp.log(zs1) - s_at,
      "teacher_nll": lse_teacher - picks,
      "agree": student_best[1] == teacher_argmax,
  }
