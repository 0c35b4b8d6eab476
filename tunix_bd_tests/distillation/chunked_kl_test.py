# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`distill_stats` against a NumPy brute force on logits rows."""

from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import lm_head
from tunix_bd.distillation import chunked_kl


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


class DistillStatsTest(parameterized.TestCase):

  @parameterized.parameters(1, 3, 16)
  def test_an_injected_student_s_extra_ids_count_as_densely(self, chunk):
    # Logits rows (an injected student call) one id wider than the teacher,
    # whose extra logit is no excluded one: it still takes student mass,
    # and may be the student's argmax.
    rng = np.random.default_rng(0)
    student = rng.normal(size=(2, 3, 7)).astype(np.float32)
    teacher = rng.normal(size=(2, 3, 6)).astype(np.float32)
    student[0, 0, 6] = 9.0  # The student's argmax, past the teacher's ids.
    completion = rng.integers(0, 6, size=(2, 3))
    tau = 2.0
    stats = chunked_kl.distill_stats(
        lm_head.Rows(jnp.asarray(student)),
        lm_head.Rows(jnp.asarray(teacher)),
        jnp.asarray(completion),
        temperature=tau,
        chunk=chunk,
    )
    logp_t = _log_softmax(teacher / tau)
    logp_s = _log_softmax(student / tau)[..., :6]
    kl = (np.exp(logp_t) * (logp_t - logp_s)).sum(-1)
    best_t = teacher.argmax(-1)
    hard = -np.take_along_axis(_log_softmax(student), best_t[..., None], -1)
    nll = -np.take_along_axis(logp_t, completion[..., None], -1)
    np.testing.assert_allclose(stats["kl"], kl, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["hard_nll"], hard[..., 0], rtol=1e-5)
    np.testing.assert_allclose(stats["teacher_nll"], nll[..., 0], rtol=1e-5)
    np.testing.assert_array_equal(stats["agree"], student.argmax(-1) == best_t)


if __name__ == "__main__":
  absltest.main()
