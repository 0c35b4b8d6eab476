# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The OPD loss against brute force, on real rollouts of tiny Qwen3 models.

docs/design.md "OPD invariants": KL properties and the NumPy brute force
(15), trace canvases equal a single-canvas forward on each slot's commit
canvas (16), generation is stop-gradient (14), weights other than the
source's are refused before the teacher runs (13), and same-position
alignment refuses weighted clean targets.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import scoring
from tunix_bd.distillation import chunked_kl
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd_tests import test_common
from tunix_bd_tests.core import replay_reference

_VOCAB, _MASK, _STOP, _PAD = 64, 2, 5, 0
_CORRUPTION = corruption_lib.SftCorruptionConfig(min_noise=0.2, max_noise=0.9)


def _bd(block_size=4, alignment=bd_config.SHIFTED):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )


def _rollout(model, bd):
  return test_common.sampled_trace(model, bd, stop_id=_STOP, pad_id=_PAD)


def _batch(trace, canvas, step=0):
  (batch,) = sources.rollout_batches(
      trace,
      step=step,
      canvas=canvas,
      stop_ids=(_STOP,),
      eos_id=_STOP,
      corruption=_CORRUPTION,
  )
  return batch


def _np_log_softmax(x, tau):
  x = np.asarray(x, np.float64) / tau
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _brute_student_logits(model, batch, bd, canvas):
  """`[batch, T, vocab]` student logits: one plain forward per canvas."""
  width = batch.trace.prompt_tokens.shape[1]
  if canvas == sources.CORRUPTED:
    logits = diffusion_lm.diffusion_logits_fn(
        model,
        batch.noisy_tokens,
        batch.positions,
        batch.segment_ids,
        config=bd,
        clean_tokens=batch.input_tokens,
    )
    return np.asarray(logits)[:, width:]
  full = batch.trace
  rows = canvases.sequence(full)
  out = np.zeros(batch.trace.tokens.shape + (_VOCAB,), np.float32)
  for step in range(bd.block_size):
    logits = np.asarray(
        diffusion_lm.diffusion_logits_fn(
            model,
            replay_reference.step_canvas(full, step),
            rows.positions,
            rows.segment_ids,
            config=bd,
            clean_tokens=rows.tokens,
        )
    )[:, width:]
    here = batch.trace.action_step == step
    out[here] = logits[here]
  return out


def _brute_teacher_logp(teacher, batch, tau):
  """Causal logits of the clean rows, shifted by hand, mask excluded."""
  width = batch.trace.prompt_tokens.shape[1]
  positions, segments = batch.positions, batch.segment_ids
  causal = (
      (segments[:, :, None] > 0)
      & (segments[:, None, :] > 0)
      & (positions[:, None, :] <= positions[:, :, None])
  )
  raw = np.asarray(
      teacher(
          jnp.asarray(batch.input_tokens),
          jnp.asarray(positions),
          None,
          jnp.asarray(causal),
      )[0],
      np.float64,
  )
  out = np.zeros(batch.trace.tokens.shape + (_VOCAB,))
  for r, c in zip(*np.nonzero(segments[:, width:])):
    (before,) = np.flatnonzero(
        (positions[r] == positions[r, width + c] - 1) & (segments[r] > 0)
    )
    logits = raw[r, before].copy()
    logits[_MASK] = -np.inf
    out[r, c] = _np_log_softmax(logits, tau)
  return out


def _brute_loss(student_logits, teacher_logp, weights, tau, hard=0.0):
  """Sum w tau^2 KL / sum w (+ hard * sum w CE / sum w), and KL per slot."""
  excluded = np.arange(_VOCAB) == _MASK
  scored = weights > 0
  teacher = teacher_logp[scored]
  student = _np_log_softmax(np.where(excluded, -np.inf, student_logits), tau)
  p = np.exp(teacher)
  student_logp = np.where(excluded, 0.0, student[scored])
  kl = np.sum(np.where(excluded, 0.0, p * (teacher - student_logp)), axis=-1)
  w = weights[scored]
  loss = tau**2 * np.sum(w * kl) / np.sum(w)
  plain = _np_log_softmax(np.where(excluded, -np.inf, student_logits), 1.0)
  ce = -np.take_along_axis(plain[scored], teacher.argmax(-1)[:, None], -1)
  return loss + hard * np.sum(w * ce[:, 0]) / np.sum(w), kl


class StrategyTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.student = test_common.tiny_qwen3(_VOCAB, seed=1)
    cls.teacher = test_common.tiny_qwen3(_VOCAB, seed=2)
    cls.trace = _rollout(cls.student, _bd())

  def _loss(
      self,
      canvas,
      tau=1.0,
      hard=0.0,
      bd=None,
      student=None,
      teacher=None,
      trace=None,
  ):
    bd = bd or _bd()
    strategy = strategy_lib.DiffusionOpdStrategy(
        bd=bd,
        vocab_size=_VOCAB,
        canvas=canvas,
        temperature=tau,
        hard_loss_weight=hard,
    )
    batch = _batch(trace or self.trace, canvas)
    targets = strategy.get_teacher_outputs(
        teacher or self.teacher, {"batch": batch}
    )
    # Compiled, not op by op: the same loss, a fraction of the time.
    loss, aux = nnx.jit(lambda m: strategy.get_train_loss(m, targets, None))(
        student or self.student
    )
    return float(loss), aux, batch, targets

  # Each canvas once: the temperature and the hard loss act on the student's
  # logits whatever canvas gave them.
  @parameterized.parameters(
      (sources.CORRUPTED, 1.0, 0.0), (sources.TRACE, 2.0, 0.5)
  )
  def test_loss_equals_numpy_brute_force(self, canvas, tau, hard):
    loss, aux, batch, _ = self._loss(canvas, tau, hard)
    self.assertGreater(batch.weights.sum(), 0)
    student_logits = _brute_student_logits(self.student, batch, _bd(), canvas)
    teacher_logp = _brute_teacher_logp(self.teacher, batch, tau)
    expected, kl = _brute_loss(
        student_logits, teacher_logp, batch.weights, tau, hard
    )
    self.assertAlmostEqual(loss, expected, delta=2e-4 * max(1, expected))
    self.assertTrue((kl >= 0).all())
    w = batch.weights[batch.weights > 0]
    np.testing.assert_allclose(
        aux["kl"][0] / aux["kl"][1], np.sum(w * kl) / np.sum(w), rtol=2e-4
    )

  def test_trace_canvas_logits_equal_each_slots_commit_canvas(self):
    bd = _bd()
    batch = _batch(self.trace, sources.TRACE)
    self.assertGreater(
        batch.trace.action_step.max(), 0
    )  # Several steps a block.
    strategy = strategy_lib.DiffusionOpdStrategy(
        bd=bd, vocab_size=_VOCAB, canvas=sources.TRACE
    )
    targets = strategy.get_teacher_outputs(self.teacher, {"batch": batch})
    rows = strategy.trace_output(self.student, targets)
    got = np.asarray(lm_head.dense_logits(rows))
    want = _brute_student_logits(self.student, batch, bd, sources.TRACE)
    generated = batch.trace.action_step >= 0
    np.testing.assert_allclose(got[generated], want[generated], atol=2e-4)
    np.testing.assert_array_equal(np.asarray(rows.values)[~generated], 0.0)

  def test_kl_is_zero_when_the_student_is_the_teacher(self):
    # One-token blocks: the student's logits are exactly causal (invariant 2).
    # The class's rollout as such a trace (each slot its own block, one
    # step): KL = 0 whatever tokens the student sampled.
    bd = _bd(block_size=1)
    steps = self.trace.action_step
    trace = self.trace.replace(
        bd=bd, action_step=np.where(steps >= 0, 0, -1).astype(np.int32)
    )
    for canvas in sources.CANVASES:
      loss, aux, _, _ = self._loss(
          canvas, bd=bd, student=self.teacher, trace=trace
      )
      self.assertLess(abs(loss), 1e-5)
      self.assertLess(float(aux["kl"][0]), 1e-4)

  def test_generation_is_stop_gradient(self):
    canvas = sources.TRACE
    strategy = strategy_lib.DiffusionOpdStrategy(
        bd=_bd(), vocab_size=_VOCAB, canvas=canvas
    )
    batch = _batch(self.trace, canvas)
    # The source hands the loss NumPy constants, never a traced value.
    for leaf in jax.tree.leaves(batch):
      self.assertIsInstance(leaf, np.ndarray)
    targets = strategy.get_teacher_outputs(self.teacher, {"batch": batch})
    # Compiled, not op by op: the same gradients, a fraction of the time.
    grads = nnx.jit(
        nnx.grad(lambda m: strategy.get_train_loss(m, targets, None)[0])
    )(self.student)
    teacher_logp = jnp.asarray(_brute_teacher_logp(self.teacher, batch, 1.0))
    weights = jnp.asarray(batch.weights)
    full = batch.trace
    rows = canvases.sequence(full)
    width = batch.trace.prompt_tokens.shape[1]

    def brute(model):
      total = 0.0
      for step in range(_bd().block_size):
        logits = diffusion_lm.diffusion_logits_fn(
            model,
            replay_reference.step_canvas(full, step),
            rows.positions,
            rows.segment_ids,
            config=_bd(),
            clean_tokens=rows.tokens,
        )[:, width:]
        kl = strategy_lib.forward_kl(
            teacher_logp.astype(jnp.float32), scoring.log_probs(logits)
        )
        here = jnp.asarray(batch.trace.action_step == step)
        total += jnp.sum(jnp.where(here, weights * kl, 0.0))
      return total / jnp.sum(weights)

    want = nnx.jit(nnx.grad(brute))(self.student)
    for got_leaf, want_leaf in zip(
        jax.tree.leaves(grads), jax.tree.leaves(want)
    ):
      np.testing.assert_allclose(got_leaf, want_leaf, atol=2e-5, rtol=2e-3)
    self.assertGreater(
        max(float(jnp.abs(g).max()) for g in jax.tree.leaves(grads)), 0
    )

  def test_same_position_rejects_weighted_clean_targets(self):
    bd = _bd(alignment=bd_config.SAME_POSITION)
    trace = dataclasses.replace(self.trace, bd=bd)
    batch = _batch(trace, sources.CORRUPTED)
    strategy = strategy_lib.DiffusionOpdStrategy(
        bd=bd, vocab_size=_VOCAB, canvas=sources.CORRUPTED
    )
    strategy.get_teacher_outputs(self.teacher, {"batch": batch})  # Valid.
    clean = (batch.trace.action_step >= 0) & (batch.weights == 0)
    bad = batch.replace(weights=np.where(clean, 1.0, batch.weights))
    with self.assertRaisesRegex(ValueError, "same_position"):
      strategy.get_teacher_outputs(self.teacher, {"batch": bad})

  def test_bad_weights_fail_before_the_teacher_runs(self):
    batch = _batch(self.trace, sources.TRACE)
    never = batch.trace.action_step < 0
    self.assertTrue(never.any())  # The rollout has slots never generated.
    strategy = strategy_lib.DiffusionOpdStrategy(bd=_bd(), vocab_size=_VOCAB)
    cases = (
        (np.where(batch.weights > 0, np.nan, 0.0), "finite and >= 0"),
        (np.where(batch.weights > 0, -1.0, 0.0), "finite and >= 0"),
        (np.where(never, 1.0, batch.weights), "never generated"),
    )
    for weights, message in cases:
      bad = batch.replace(weights=weights.astype(np.float32))
      # No teacher: a check that came after its forward would fail otherwise.
      with self.assertRaisesRegex(ValueError, message):
        strategy.get_teacher_outputs(None, {"batch": bad})

  def test_bad_settings_fail(self):
    with self.assertRaisesRegex(ValueError, "opd.temperature"):
      strategy_lib.DiffusionOpdStrategy(
          bd=_bd(), vocab_size=_VOCAB, temperature=0.0
      )
    other = _batch(
        dataclasses.replace(self.trace, bd=_bd(block_size=2)), "trace"
    )
    with self.assertRaisesRegex(ValueError, "rollout's bd"):
      strategy_lib.DiffusionOpdStrategy(
          bd=_bd(), vocab_size=_VOCAB
      ).get_teacher_outputs(self.teacher, {"batch": other})
    with self.assertRaisesRegex(ValueError, "OpdBatch"):
      strategy_lib.DiffusionOpdStrategy(
          bd=_bd(), vocab_size=_VOCAB
      ).get_teacher_outputs(self.teacher, {"batch": {"tokens": 1}})


def _rel(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


class ChunkedStrategyTest(parameterized.TestCase):
  """`logits_chunk`: both heads in vocabulary chunks, equal to the dense."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.student = test_common.tiny_qwen3(_VOCAB, seed=1)
    cls.teacher = test_common.tiny_qwen3(_VOCAB, seed=2, tied=True)
    cls.trace = _rollout(cls.student, _bd())

  # Chunks of 24 (not dividing the 64 ids: the last overlaps) and 16.
  @parameterized.parameters(
      (sources.CORRUPTED, 2.0, 0.5, 24), (sources.TRACE, 0.7, 1.0, 16)
  )
  def test_equals_the_dense_loss_and_gradients(self, canvas, tau, hard, chunk):
    batch = _batch(self.trace, canvas)

    def value_and_grad(logits_chunk):
      strategy = strategy_lib.DiffusionOpdStrategy(
          bd=_bd(),
          vocab_size=_VOCAB,
          canvas=canvas,
          temperature=tau,
          hard_loss_weight=hard,
          logits_chunk=logits_chunk,
      )
      targets = strategy.get_teacher_outputs(self.teacher, {"batch": batch})
      loss = lambda m: strategy.get_train_loss(m, targets, None)
      step = nnx.jit(nnx.value_and_grad(loss, has_aux=True))
      (value, aux), grads = step(self.student)
      return value, aux, nnx.to_pure_dict(grads), targets

    want, want_aux, want_grads, dense = value_and_grad(None)
    got, got_aux, got_grads, targets = value_and_grad(chunk)
    # No teacher distribution rides in the chunked targets.
    self.assertIsNone(targets.teacher_logp)
    self.assertIsNone(dense.teacher_rows)
    self.assertLess(_rel(got, want), 1e-6)
    for name in want_aux:
      self.assertLess(_rel(got_aux[name], want_aux[name]), 1e-6, name)
    for path, want_leaf in jax.tree_util.tree_leaves_with_path(want_grads):
      got_leaf = got_grads
      for key in path:
        got_leaf = got_leaf[key.key]
      self.assertLess(_rel(got_leaf, want_leaf), 1e-6, str(path))

  def test_an_injected_student_call_works_with_the_chunked_head(self):
    # Its logits are the student's rows: the KL in chunks, the same loss.
    batch = _batch(self.trace, sources.CORRUPTED)
    injected = lambda *args, **kwargs: diffusion_lm.diffusion_logits_fn(
        *args, **kwargs
    )

    def loss(**kwargs):
      strategy = strategy_lib.DiffusionOpdStrategy(
          bd=_bd(), vocab_size=_VOCAB, canvas=sources.CORRUPTED, **kwargs
      )
      targets = strategy.get_teacher_outputs(self.teacher, {"batch": batch})
      return strategy.get_train_loss(self.student, targets, None)[0]

    got = loss(logits_fn=injected, logits_chunk=24)
    self.assertLess(_rel(got, loss()), 1e-6)

  def test_a_padded_teacher_vocabulary(self):
    # The student adds one id (its mask, excluded) the teacher lacks.
    rng = np.random.default_rng(0)
    student = lm_head.Head(
        jnp.asarray(rng.standard_normal((65, 16)), jnp.float32), 0, None, (64,)
    )
    teacher = lm_head.Head(
        jnp.asarray(rng.standard_normal((16, 64)), jnp.float32), 1, None, ()
    )
    hidden = jnp.asarray(rng.standard_normal((3, 5, 16)), jnp.float32)
    teacher_hidden = jnp.asarray(rng.standard_normal((3, 5, 16)), jnp.float32)
    student_rows = lm_head.Rows(hidden, student)
    teacher_rows = lm_head.Rows(teacher_hidden, teacher)
    completion = jnp.asarray(rng.integers(0, 64, (3, 5)), jnp.int32)
    got = chunked_kl.distill_stats(
        student_rows,
        teacher_rows,
        completion,
        temperature=0.8,
        chunk=10,
    )
    padded = jnp.pad(
        lm_head.dense_logits(teacher_rows),
        ((0, 0), (0, 0), (0, 1)),
        constant_values=diffusion_lm.MASKED_LOGIT,
    )
    teacher_logp = scoring.log_probs(padded, 0.8)
    student_logits = lm_head.dense_logits(student_rows)
    kl = strategy_lib.forward_kl(
        teacher_logp, scoring.log_probs(student_logits, 0.8)
    )
    self.assertLess(_rel(got["kl"], kl), 1e-6)
    argmax = jnp.argmax(teacher_logp, axis=-1)
    hard = -scoring.token_log_probs(student_logits, argmax)
    self.assertLess(_rel(got["hard_nll"], hard), 1e-6)
    nll = -jnp.take_along_axis(teacher_logp, completion[..., None], -1)[..., 0]
    self.assertLess(_rel(got["teacher_nll"], nll), 1e-6)
    np.testing.assert_array_equal(
        got["agree"], jnp.argmax(student_logits, -1) == argmax
    )
    with self.assertRaisesRegex(ValueError, "may only add excluded ids"):
      chunked_kl.distill_stats(
          lm_head.Rows(hidden, dataclasses.replace(student, excluded=())),
          teacher_rows,
          completion,
          temperature=0.8,
      )


if __name__ == "__main__":
  absltest.main()
