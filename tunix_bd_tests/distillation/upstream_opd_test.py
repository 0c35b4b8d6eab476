# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's OPD loss against Tunix's own diffusion OPD objective (a peer).

`tunix.distillation.diffusion_opd` (the open PR stack #1745-#1749, wheel
0.1.8.dev20260723) is written by others; where it is installed it is an
oracle. Its prepared batch is built from tunix_bd's: the student inputs are
the rollout's (`replay.TRACE_INPUTS`, scored by `replay.ReplayLogitsFn`, or
the corrupted canvas), the weights tunix_bd's, the teacher logits
`tau * OpdTargets.teacher_logp`. The loss and its gradients are equal; each
deliberate difference is pinned by a test of its own:

  * normalisation: tunix_bd divides a micro-batch's sum by the global
    batch's weight (exact gradient accumulation, `core.denominators`),
    Tunix returns the micro-batch's `(sum, weight)` and reduces them itself;
  * hard target: tunix_bd's cross-entropy is on the teacher's argmax,
    Tunix's on the batch's `target_ids`;
  * teacher representation: tunix_bd keeps the teacher's log-probs at tau,
    Tunix takes logits and divides them by tau;
  * metrics: Tunix's `distill/soft_loss` includes tau^2, tunix_bd's `kl`
    does not.
"""

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import replay
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd_tests import test_common

try:
  from tunix.distillation import diffusion as tunix_opd_batch
  from tunix.distillation import diffusion_opd
except ImportError:  # google-tunix 0.1.7, Tunix main.
  tunix_opd_batch = diffusion_opd = None

_SKIP = (
    "the installed Tunix has no tunix.distillation.diffusion_opd (the PR"
    " stack #1745-#1749, wheel google_tunix-0.1.8.dev20260723)"
)
_VOCAB, _MASK, _STOP, _PAD = 64, 2, 5, 0
_CORRUPTION = corruption_lib.SftCorruptionConfig(min_noise=0.2, max_noise=0.9)


def _bd():
  return bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=_MASK)


def _corrupted_logits_fn(bd, prompt_width):
  """The `corrupted` canvas's student call, as a `DiffusionLogitsFn`."""

  def fn(model, inputs):
    logits = diffusion_lm.diffusion_logits_fn(
        model,
        inputs["tokens"],
        inputs["positions"],
        inputs["segment_ids"],
        config=bd,
        clean_tokens=inputs["clean_tokens"],
    )
    return logits[:, prompt_width:]

  return fn


def _prepared(batch, targets, canvas, tau, hard_targets="teacher"):
  """Tunix's prepared batch and student logits fn, from tunix_bd's batch."""
  bd, trace = targets.batch.trace.bd, targets.batch.trace
  if canvas == sources.TRACE:
    inputs = {n: jnp.asarray(getattr(trace, n)) for n in replay.TRACE_INPUTS}
    logits_fn = replay.ReplayLogitsFn(bd)
  else:
    inputs = dict(
        tokens=jnp.asarray(batch.noisy_tokens),
        clean_tokens=jnp.asarray(batch.input_tokens),
        positions=jnp.asarray(batch.positions),
        segment_ids=jnp.asarray(batch.segment_ids),
    )
    logits_fn = _corrupted_logits_fn(bd, np.shape(trace.prompt_tokens)[1])
  if hard_targets == "teacher":
    target_ids = jnp.argmax(targets.teacher_logp, axis=-1)
  else:
    target_ids = jnp.asarray(trace.tokens)
  student = compat.tunix_diffusion.DiffusionTokenBatch.create(
      model_inputs=inputs,
      target_ids=target_ids.astype(jnp.int32),
      loss_weights=jnp.asarray(targets.batch.weights, jnp.float32),
  )
  prepared = tunix_opd_batch.DiffusionDistillationBatch.create(
      student_batch=student, teacher_logits=tau * targets.teacher_logp
  )
  return prepared, logits_fn


@absltest.skipIf(diffusion_opd is None, _SKIP)
class UpstreamOpdTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.student = test_common.tiny_qwen3(vocab_size=_VOCAB)
    cls.teacher = test_common.tiny_qwen3(vocab_size=_VOCAB, seed=1)
    cls.trace = test_common.sampled_trace(
        cls.student, _bd(), stop_id=_STOP, pad_id=_PAD
    )

  def _setup(self, canvas, tau, hard):
    strategy = strategy_lib.DiffusionOpdStrategy(
        bd=_bd(),
        vocab_size=_VOCAB,
        canvas=canvas,
        temperature=tau,
        hard_loss_weight=hard,
    )
    batches = sources.rollout_batches(
        self.trace,
        step=0,
        canvas=canvas,
        stop_ids=(_STOP,),
        eos_id=_STOP,
        corruption=_CORRUPTION,
    )
    return strategy, [
        (b, strategy.get_teacher_outputs(self.teacher, {"batch": b}))
        for b in batches
    ]

  def _tunix(self, model, prepared, logits_fn, tau, hard):
    return diffusion_opd.diffusion_opd_loss_fn(
        model,
        prepared,
        logits_fn,
        temperature=tau,
        soft_loss_weight=1.0,
        hard_loss_weight=hard,
    )

  @parameterized.parameters(
      (sources.TRACE, 1.0, 0.0),
      (sources.TRACE, 2.0, 0.5),
      (sources.CORRUPTED, 1.0, 0.5),
      (sources.CORRUPTED, 2.0, 0.0),
  )
  def test_loss_and_gradients_equal_tunixs_objective(self, canvas, tau, hard):
    strategy, [(batch, targets)] = self._setup(canvas, tau, hard)
    prepared, logits_fn = _prepared(batch, targets, canvas, tau)

    def ours(model):
      return strategy.get_train_loss(model, targets, None)[0]

    def theirs(model):
      loss = self._tunix(model, prepared, logits_fn, tau, hard).primary_loss
      return loss.unreduced_sum / loss.denominator

    our_loss, our_grads = nnx.value_and_grad(ours)(self.student)
    their_loss, their_grads = nnx.value_and_grad(theirs)(self.student)
    self.assertGreater(float(our_loss), 0.0)
    np.testing.assert_allclose(our_loss, their_loss, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(our_grads), jax.tree.leaves(their_grads)):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

  def test_normalisation_global_weight_against_micro_batch_weight(self):
    strategy, [(batch, targets)] = self._setup(sources.TRACE, 1.0, 0.0)
    # Two micro-batches of one update: rows 0-1 and rows 2-3 (as weights,
    # so the shapes and compiled programs stay those of the whole batch).
    weights = np.asarray(targets.batch.weights)
    halves = [weights * (np.arange(4) // 2 == k)[:, None] for k in (0, 1)]
    total = weights.sum()
    ours, sums, parts = [], [], []
    for part in halves:
      micro = targets.replace(
          batch=targets.batch.replace(
              weights=jnp.asarray(part),
              global_weight=jnp.full((4,), total, jnp.float32),
              accumulation_steps=jnp.full((4,), 2, jnp.int32),
          )
      )
      ours.append(float(strategy.get_train_loss(self.student, micro, None)[0]))
      prepared, logits_fn = _prepared(batch, micro, sources.TRACE, 1.0)
      loss = self._tunix(self.student, prepared, logits_fn, 1.0, 0.0)
      sums.append(float(loss.primary_loss.unreduced_sum))
      parts.append(float(loss.primary_loss.denominator))
    self.assertNotAlmostEqual(parts[0], parts[1])
    for loss, part_sum, part_weight in zip(ours, sums, parts):
      # tunix_bd: the part over the global weight, times the 2 micro-batches
      # Tunix averages; not the micro-batch's own ratio.
      self.assertAlmostEqual(loss, part_sum * 2 / total, places=5)
      self.assertNotAlmostEqual(loss, part_sum / part_weight, places=3)
    # Both reduce to one objective over the global batch.
    self.assertAlmostEqual(np.mean(ours), sum(sums) / total, places=5)

  def test_hard_target_is_the_teachers_argmax_not_target_ids(self):
    strategy, [(batch, targets)] = self._setup(sources.TRACE, 1.0, 1.0)
    ours = float(strategy.get_train_loss(self.student, targets, None)[0])
    losses = {}
    for hard_targets in ("teacher", "rollout"):
      prepared, logits_fn = _prepared(
          batch, targets, sources.TRACE, 1.0, hard_targets
      )
      loss = self._tunix(self.student, prepared, logits_fn, 1.0, 1.0)
      losses[hard_targets] = float(
          loss.primary_loss.unreduced_sum / loss.primary_loss.denominator
      )
    self.assertAlmostEqual(ours, losses["teacher"], places=5)
    self.assertGreater(abs(ours - losses["rollout"]), 1e-2)

  @parameterized.parameters(1.0, 2.0)
  def test_teacher_logits_are_tau_times_tunix_bds_log_probs(self, tau):
    strategy, [(batch, targets)] = self._setup(sources.TRACE, tau, 0.0)
    ours = float(strategy.get_train_loss(self.student, targets, None)[0])
    prepared, logits_fn = _prepared(batch, targets, sources.TRACE, tau)
    as_logits = prepared.replace(teacher_logits=targets.teacher_logp)
    loss = self._tunix(self.student, as_logits, logits_fn, tau, 0.0)
    unscaled = float(
        loss.primary_loss.unreduced_sum / loss.primary_loss.denominator
    )
    if tau == 1.0:
      self.assertAlmostEqual(ours, unscaled, places=5)
    else:
      self.assertGreater(abs(ours - unscaled), 1e-3)

  def test_soft_metric_includes_tau_squared_and_tunix_bds_kl_does_not(self):
    tau = 2.0
    strategy, [(batch, targets)] = self._setup(sources.TRACE, tau, 0.0)
    _, aux = strategy.get_train_loss(self.student, targets, None)
    prepared, logits_fn = _prepared(batch, targets, sources.TRACE, tau)
    soft = self._tunix(self.student, prepared, logits_fn, tau, 0.0)
    soft = soft.aux_metrics["distill/soft_loss"]
    kl_sum, weight = np.asarray(aux["kl"])
    np.testing.assert_allclose(soft.denominator, weight)
    np.testing.assert_allclose(soft.unreduced_sum, tau**2 * kl_sum, rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
