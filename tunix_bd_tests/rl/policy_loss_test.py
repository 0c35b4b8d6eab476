# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.policy_loss (docs/design.md "RL invariants" 1-5).

`grpo_objective` is pinned to Tunix's own `algo_core.grpo_loss_fn` on a
logit-table model, whose logits do not depend on the tokens, so Tunix's AR
log-probs and the ones handed to `grpo_objective` are the same numbers. The
registered loss is tested on traces of real rollouts of a tiny Qwen3.
"""

from __future__ import annotations

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.rl import algo_core
from tunix.rl import common
from tunix.rl import function_registry
from tunix.rl import utils as rl_utils
from tunix.rl.grpo import grpo_learner
from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import canvases
from tunix_bd.core import replay
from tunix_bd.core import replayer
from tunix_bd.rl import policy_loss
from tunix_bd_tests import test_common

_VOCAB, _MASK, _STOP, _PAD = 64, 2, 5, 0
_AGG_MODES = (
    "token-mean",
    "sequence-mean-token-mean",
    "sequence-mean-token-scale",
    "seq-mean-token-sum",
    "sequence-mean-token-sum-norm",
)
_LOSS_ALGOS = ("grpo", "gspo-token")

# The logit-table batch: prompt width, completion width, vocabulary and each
# row's number of actions (an empty row included).
_P, _T, _V = 3, 6, 11
_ACTIONS = (6, 4, 1, 0)


class _LogitTable(nnx.Module):
  """Learnable logits `[length, vocab]` by column, blind to the tokens."""

  def __init__(self, table):
    self.table = nnx.Param(jnp.asarray(table, jnp.float32))

  def __call__(self, tokens, positions=None, cache=None, attention_mask=None):
    del positions, cache, attention_mask
    batch, length = tokens.shape
    logits = self.table[...][:length]
    return jnp.broadcast_to(logits, (batch,) + logits.shape), None


def _table_log_probs(model, completion_ids):
  """float32 `[batch, T]`: completion slot j is predicted by column P+j-1."""
  log_probs = jax.nn.log_softmax(model.table[...][_P - 1 : _P - 1 + _T])
  return jnp.take_along_axis(
      jnp.broadcast_to(log_probs, completion_ids.shape + (_V,)),
      completion_ids[..., None],
      axis=-1,
  )[..., 0]


def _grpo_config(loss_algo="grpo", agg_mode="token-mean", beta=0.04):
  config = grpo_learner.GRPOConfig(
      loss_algo=loss_algo, loss_agg_mode=agg_mode, beta=beta
  )
  config.temperature = 1.0  # Set by GRPOLearner from the rollout config.
  return config


# The KL mode each algorithm's on-policy check runs with (any would do):
# the zero-KL check of that mode shares its compiled loss.
_KL_MODE_OF = {"grpo": "kl", "gspo-token": "low_var_kl"}


def _bd():
  return bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=_MASK)


class GrpoObjectiveMatchesTunixTest(parameterized.TestCase):
  """Loss, aux and gradients equal Tunix's `grpo_loss_fn` (RL item 3)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    rng = np.random.default_rng(0)
    cls.table = rng.standard_normal((_P + _T, _V)).astype(np.float32)
    cls.ids = jnp.asarray(rng.integers(0, _V, (len(_ACTIONS), _T)), jnp.int32)
    cls.mask = jnp.asarray(
        np.arange(_T)[None, :] < np.asarray(_ACTIONS)[:, None]
    )
    live = _table_log_probs(_LogitTable(cls.table), cls.ids)
    cls.fields = dict(
        prompt_ids=jnp.asarray(rng.integers(1, _V, (len(_ACTIONS), _P))),
        prompt_mask=jnp.ones((len(_ACTIONS), _P), bool),
        completion_ids=cls.ids,
        completion_mask=cls.mask,
        advantages=jnp.asarray([1.3, -0.7, 0.4, -1.1], jnp.float32),
    )
    # Wide enough that the PPO clip and the dual clip both engage.
    cls.old = live + 0.5 * rng.standard_normal(live.shape).astype(np.float32)
    cls.ref = live + 0.3 * rng.standard_normal(live.shape).astype(np.float32)
    cls.weights = rng.uniform(0.5, 1.5, live.shape).astype(np.float32)

  def _example(self, *, old, ref, weights=None):
    return grpo_learner.TrainExample(
        **self.fields,
        ref_per_token_logps=jnp.asarray(self.ref) if ref else None,
        old_per_token_logps=jnp.asarray(self.old) if old else None,
        sampler_is_weights=None if weights is None else jnp.asarray(weights),
    )

  def _assert_matches_tunix(self, config, example):
    def tunix_loss(model):
      # A `(loss, aux)` tuple in 0.1.7, a `LossOutput` on Tunix main.
      return compat.loss_and_aux(
          algo_core.grpo_loss_fn(model, example, config, _PAD, _STOP)
      )

    def our_loss(model):
      logps = _table_log_probs(model, self.ids)
      return policy_loss.grpo_objective(logps, example, config)

    grad = lambda fn: nnx.value_and_grad(fn, has_aux=True)(
        _LogitTable(self.table)
    )
    (want, want_aux), want_grad = grad(tunix_loss)
    (got, got_aux), got_grad = grad(our_loss)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        got_grad.table[...], want_grad.table[...], rtol=1e-5, atol=1e-6
    )
    self.assertGreater(np.abs(want_grad.table[...]).max(), 1e-3)
    # Every aux entry of Tunix's (entropy aside) is ours, with its value.
    self.assertEmpty(set(want_aux) - set(got_aux) - {"entropy"})
    for key in sorted(set(want_aux) - {"entropy"}):
      np.testing.assert_allclose(
          got_aux[key], want_aux[key], rtol=1e-5, atol=1e-6, err_msg=key
      )
    return want_aux

  def test_tunix_per_token_logps_are_the_table_logps(self):
    model = _LogitTable(self.table)
    tunix_logps = common.compute_per_token_logps(
        *nnx.split(model),
        prompt_tokens=self.fields["prompt_ids"],
        completion_tokens=self.ids,
        pad_id=_PAD,
        eos_id=_STOP,
    )
    np.testing.assert_allclose(
        tunix_logps, _table_log_probs(model, self.ids), atol=1e-6
    )

  @parameterized.product(
      loss_algo=_LOSS_ALGOS,
      agg_mode=_AGG_MODES,
      beta=(0.0, 0.04),
      old=(False, True),
  )
  def test_equals_tunix(self, loss_algo, agg_mode, beta, old):
    config = _grpo_config(loss_algo, agg_mode, beta)
    # Tunix's learner computes the reference only when beta != 0.
    aux = self._assert_matches_tunix(
        config, self._example(old=old, ref=beta != 0.0)
    )
    if old:
      self.assertGreater(float(aux["pg_clipfrac"]), 0.0)

  @parameterized.product(
      loss_algo=_LOSS_ALGOS,
      agg_mode=_AGG_MODES,
      option=("epsilon_high", "dual_clip", "sampler_is", "low_var_kl"),
  )
  def test_equals_tunix_with_option(self, loss_algo, agg_mode, option):
    config = _grpo_config(loss_algo, agg_mode)
    weights = None
    if option == "epsilon_high":
      config.epsilon_high = 0.28  # Read by hasattr, as DAPO's config has it.
    elif option == "dual_clip":
      config.epsilon_c = 1.5
    elif option == "sampler_is":
      weights = self.weights
    else:
      config.kl_loss_mode = "low_var_kl"
      config.kl_clamp_value = 0.05
    aux = self._assert_matches_tunix(
        config, self._example(old=True, ref=True, weights=weights)
    )
    if option == "dual_clip" and loss_algo == "grpo":
      self.assertGreater(float(aux["pg_clipfrac_lower"]), 0.0)

  def test_rejects_a_per_token_input_of_another_shape(self):
    example = self._example(old=False, ref=False)
    with self.assertRaisesRegex(ValueError, "per_token_logps has shape"):
      policy_loss.grpo_objective(
          jnp.zeros((len(_ACTIONS), _T - 1)), example, _grpo_config()
      )


class DiffusionGrpoLossTest(parameterized.TestCase):
  """The registered loss on real rollouts of a tiny Qwen3 (RL items 4-6)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = test_common.tiny_qwen3(vocab_size=_VOCAB, seed=0)
    cls.trace = test_common.sampled_trace(
        cls.model, _bd(), stop_id=_STOP, pad_id=_PAD
    )
    cls.advantages = np.asarray([1.0, -0.5, 0.25, -0.75], np.float32)
    cls.live = replayer.Replayer(cls.model)(cls.trace)
    cls.aux_at_live = {}

  def _example(self, **kwargs):
    return policy_loss.DiffusionTrainExample.from_trace(
        self.trace, pad_id=_PAD, advantages=self.advantages, **kwargs
    )

  def _loss(self, example, config, model=None):
    # Jitted, as Tunix's trainer runs it: the trace's arrays are traced.
    fn = lambda model, example: policy_loss.diffusion_grpo_loss(
        model, example, config, _PAD, _STOP
    )
    return nnx.jit(fn)(model or self.model, example)

  def _aux_at_live(self, loss_algo, kl_loss_mode):
    """The loss's aux with old and reference log-probs both the live ones.

    Memoized: the on-policy and zero-KL tests share one compile a pair.
    """
    key = (loss_algo, kl_loss_mode)
    if key not in self.aux_at_live:
      config = _grpo_config(loss_algo, beta=0.04)
      config.kl_loss_mode = kl_loss_mode
      example = self._example(
          old_per_token_logps=self.live, ref_per_token_logps=self.live
      )
      self.aux_at_live[key] = self._loss(example, config)[1]
    return self.aux_at_live[key]

  def test_registered_under_its_name_on_import(self):
    self.assertIs(
        function_registry.get_policy_loss_fn(policy_loss.POLICY_LOSS_NAME),
        policy_loss.diffusion_grpo_loss,
    )

  def test_every_leaf_is_batch_major_and_slices_to_a_trace(self):
    example = self._example(old_per_token_logps=self.live)
    batch = len(self.advantages)
    for leaf in jax.tree.leaves(example):
      self.assertEqual(np.shape(leaf)[0], batch)
    # Tunix's mini-batch slicing keeps a valid trace with its settings.
    part = rl_utils.get_batch_slice(example, slice(1, 3))
    self.assertEqual(part.trace.bd, self.trace.bd)
    # The static replay shape is the whole batch's, a bound for any slice.
    self.assertEqual(
        part.num_canvases, canvases.static_num_canvases(self.trace)
    )
    self.assertEqual(
        part.context_length, canvases.static_context_length(self.trace)
    )
    np.testing.assert_allclose(
        replayer.Replayer(self.model)(part.trace),
        self.live[1:3],
        atol=1e-5,
    )

  def test_counted_shape_gives_the_loss_of_the_worst_case_shape(self):
    example = self._example(ref_per_token_logps=self.live)
    every = example.replace(num_canvases=None, context_length=None)
    # Counted: fewer canvases and a shorter clean context than the worst
    # case the jitted loss assumes.
    size, width = self.trace.bd.block_size, self.trace.tokens.shape[1]
    worst = canvases.num_completion_blocks(size, width) * size
    self.assertLess(example.num_canvases, canvases.canvas_bucket(worst, size))
    whole = self.trace.prompt_tokens.shape[1] + width
    self.assertLess(example.context_length, whole)
    config = _grpo_config(beta=0.04)
    (loss, aux), (every_loss, every_aux) = (
        self._loss(e, config) for e in (example, every)
    )
    self.assertAlmostEqual(float(loss), float(every_loss), delta=1e-6)
    self.assertAlmostEqual(float(aux["kl"]), float(every_aux["kl"]), delta=1e-6)

  def test_the_actions_are_the_trace_s_whatever_completion_mask_says(self):
    example = self._example(ref_per_token_logps=self.live)
    # Every action dropped and every never-generated slot added.
    other = example.replace(completion_mask=~example.completion_mask)
    config = _grpo_config(beta=0.04)
    # One program for both (jitted, as Tunix's trainer runs the loss).
    loss_fn = nnx.jit(
        lambda model, example: policy_loss.diffusion_grpo_loss(
            model, example, config, _PAD, _STOP
        )
    )
    (want, want_aux), (got, got_aux) = (
        loss_fn(self.model, e) for e in (example, other)
    )
    self.assertEqual(float(got), float(want))
    for key in ("kl", "pg_clipfrac", "advantage/abs_mean"):
      self.assertEqual(float(got_aux[key]), float(want_aux[key]), msg=key)

  @parameterized.parameters("grpo", "gspo-token")
  def test_first_micro_batch_is_on_policy(self, loss_algo):
    aux = self._aux_at_live(loss_algo, _KL_MODE_OF[loss_algo])
    for key in ("is_ratio/mean", "is_ratio/min", "is_ratio/max"):
      self.assertAlmostEqual(float(aux[key]), 1.0, delta=1e-6, msg=key)
    self.assertEqual(float(aux["pg_clipfrac"]), 0.0)
    self.assertLess(abs(float(aux["ppo_kl"])), 1e-6)

  def test_live_gradient_is_nonzero_and_finite(self):
    other = test_common.tiny_qwen3(vocab_size=_VOCAB, seed=1)
    example = self._example(
        ref_per_token_logps=replayer.Replayer(other)(self.trace)
    )
    config = _grpo_config(beta=0.04)
    loss_fn = lambda model: policy_loss.diffusion_grpo_loss(
        model, example, config, _PAD, _STOP
    )
    (loss, aux), grads = nnx.jit(nnx.value_and_grad(loss_fn, has_aux=True))(
        self.model
    )
    leaves = [np.asarray(g) for g in jax.tree.leaves(grads)]
    self.assertTrue(np.isfinite(loss))
    self.assertGreater(float(aux["kl"]), 0.0)
    self.assertTrue(all(np.isfinite(g).all() for g in leaves))
    self.assertGreater(max(np.abs(g).max() for g in leaves), 1e-4)

  def test_replay_gradient_matches_finite_differences(self):
    graphdef, state = nnx.split(self.model)
    total = lambda model: replay.replay_log_probs(model, self.trace).sum()
    grads = nnx.jit(nnx.grad(total))(self.model)
    flat_total = jax.jit(lambda s: total(nnx.merge(graphdef, s)))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(state)
    index = next(
        i for i, (path, _) in enumerate(leaves) if "q_proj" in str(path)
    )
    grad = np.asarray(jax.tree.leaves(grads)[index])
    entry = np.unravel_index(np.abs(grad).argmax(), grad.shape)
    values = [leaf for _, leaf in leaves]

    def shifted(delta):
      moved = list(values)
      moved[index] = values[index].at[entry].add(delta)
      return float(flat_total(jax.tree.unflatten(treedef, moved)))

    step = 1e-2
    finite_difference = (shifted(step) - shifted(-step)) / (2 * step)
    self.assertGreater(abs(grad[entry]), 1e-2)
    self.assertAlmostEqual(
        finite_difference, grad[entry], delta=1e-2 * abs(grad[entry]) + 1e-3
    )

  @parameterized.parameters("kl", "low_var_kl", "mse_kl")
  def test_kl_is_zero_at_identical_weights(self, kl_loss_mode):
    loss_algo = {v: k for k, v in _KL_MODE_OF.items()}.get(kl_loss_mode)
    aux = self._aux_at_live(loss_algo or "grpo", kl_loss_mode)
    self.assertLess(abs(float(aux["kl"])), 1e-6)
    self.assertLess(abs(float(aux["kl_loss"])), 1e-6)

  def test_fails_closed_without_a_trace(self):
    example = self._example()
    stock = grpo_learner.TrainExample(
        prompt_ids=example.prompt_ids,
        prompt_mask=example.prompt_mask,
        completion_ids=example.completion_ids,
        completion_mask=example.completion_mask,
        advantages=example.advantages,
        ref_per_token_logps=None,
        old_per_token_logps=None,
    )
    for bad in (stock, example.replace(trace=None)):
      with self.assertRaisesRegex(ValueError, "trace is None"):
        policy_loss.diffusion_grpo_loss(
            self.model, bad, _grpo_config(), _PAD, _STOP
        )

  def test_fails_closed_on_a_mismatched_example_or_config(self):
    example = self._example()
    narrow = example.trace.replace(
        tokens=example.trace.tokens[:, :4],
        action_step=example.trace.action_step[:, :4],
        action_logp=example.trace.action_logp[:, :4],
    )
    hot = _grpo_config()
    hot.temperature = 0.7
    cases = (
        (example.replace(trace=narrow), _grpo_config(), "completion width"),
        (example, hot, "algo_config.temperature=0.7"),
        (
            example.replace(segment_ids=example.completion_mask),
            _grpo_config(),
            "packed",
        ),
    )
    for bad, config, message in cases:
      with self.assertRaisesRegex(ValueError, message):
        policy_loss.diffusion_grpo_loss(self.model, bad, config, _PAD, _STOP)


if __name__ == "__main__":
  absltest.main()
