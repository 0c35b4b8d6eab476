# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Tunix `DiffusionLogitsFn` drives tunix_bd's decoder, rollout, replay, OPD.

The logits function is written here over a model call that is not
tunix_bd's: a tiny Tunix Qwen3 called directly with a block-diffusion mask
this test builds, its logits shifted by one column by hand. On the same
weights it decodes exactly the tokens tunix_bd's own model call decodes,
replays its own traces, rolls out through Tunix's `RLCluster` and distils.
Needs no `tunix.diffusion`: a `DiffusionLogitsFn` is just a callable.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix_bd.core import bd_config
from tunix_bd.core import cached_logits
from tunix_bd.core import external_logits
from tunix_bd.core import replay
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.generate import denoise
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd_tests import test_common
from tunix_bd_tests.rl import rl_test_common as rl_common

_VOCAB, _MASK, _STOP, _PAD = 64, 2, 5, 0


def _block_mask(positions, segment_ids, block_size):
  """Bidirectional within a block, causal across blocks, pads unattended."""
  block = positions // block_size
  same = segment_ids[:, :, None] == segment_ids[:, None, :]
  real = (segment_ids != 0)[:, :, None] & (segment_ids != 0)[:, None, :]
  return same & real & (block[:, None, :] <= block[:, :, None])


def qwen3_logits_fn(block_size):
  """A user's `DiffusionLogitsFn` of a Tunix Qwen3, shifted alignment."""

  def fn(model, inputs):
    positions, segments = inputs["positions"], inputs["segment_ids"]
    mask = _block_mask(positions, segments, block_size)
    logits, _ = model(inputs["tokens"], positions, None, mask)
    # The logit at the previous logical position of the same segment
    # predicts this one, wherever it sits (pads may lie between them).
    before = (positions[:, None, :] == positions[:, :, None] - 1) & (
        segments[:, None, :] == segments[:, :, None]
    )
    before &= (segments != 0)[:, None, :]
    index = jnp.argmax(before, axis=-1)[:, :, None]
    aligned = jnp.take_along_axis(logits, index, axis=1)
    return jnp.where(before.any(-1)[:, :, None], aligned, 0.0)

  return fn


def _bd(layout=bd_config.CLEAN_CONTEXT):
  return bd_config.BlockDiffusionConfig(
      block_size=4, mask_token_id=_MASK, layout=layout
  )


def _decode(model, bd, *, temperature, use_cache=False, calls=None):
  rng = np.random.default_rng(1)
  lengths = np.asarray([3, 5, 4, 6], np.int32)
  prompts = rng.integers(_STOP + 1, _VOCAB, (4, 6)).astype(np.int32)
  config = denoise.DenoiseConfig(
      max_new_tokens=10,
      max_prompt_length=6,
      threshold=0.3,
      temperature=temperature,
      stop_ids=(_STOP,),
      pad_id=_PAD,
      use_cache=use_cache,
  )
  return denoise.Denoiser(model, bd=bd, config=config, **(calls or {}))(
      prompts, lengths, seeds=np.arange(4)
  )


class DecodeAndReplayTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model = test_common.tiny_qwen3(vocab_size=_VOCAB)
    cls.calls = external_logits.model_calls(qwen3_logits_fn(4))

  def test_greedy_tokens_equal_tunix_bds_own_path(self):
    # tunix_bd's cache-free decoder, the sampled test's program; its cached
    # one decodes the same (docs/design.md invariant 4, decode_loop_test).
    theirs = _decode(self.model, _bd(), temperature=0.0, calls=self.calls)
    ours = _decode(self.model, _bd(), temperature=0.0)
    np.testing.assert_array_equal(
        theirs.completion_tokens, ours.completion_tokens
    )
    np.testing.assert_array_equal(
        theirs.trace.action_step, ours.trace.action_step
    )
    np.testing.assert_allclose(
        theirs.trace.action_logp, ours.trace.action_logp, atol=1e-5
    )

  def test_use_cache_is_cache_free_without_a_cache(self):
    cached = _decode(
        self.model, _bd(), temperature=0.0, use_cache=True, calls=self.calls
    )
    free = _decode(self.model, _bd(), temperature=0.0, calls=self.calls)
    np.testing.assert_array_equal(
        cached.completion_tokens, free.completion_tokens
    )
    np.testing.assert_array_equal(cached.num_forwards, free.num_forwards)

  def test_sampled_trace_is_tunix_bds_and_replays_cache_free(self):
    theirs = _decode(self.model, _bd(), temperature=1.0, calls=self.calls)
    ours = _decode(self.model, _bd(), temperature=1.0)
    for name in ("tokens", "action_step", "action_logp"):
      np.testing.assert_array_equal(
          getattr(theirs.trace, name), getattr(ours.trace, name)
      )
    trace = theirs.trace
    generated = np.asarray(trace.action_step) >= 0
    # Several canvases per block, so replay scores more than one forward.
    self.assertGreater(np.asarray(trace.action_step).max(), 0)
    cached_fn = self.calls["cached_logits_fn"]
    replayed = np.asarray(
        replay.replay_log_probs(self.model, trace, cached_logits_fn=cached_fn)
    )
    error = np.abs(replayed - np.asarray(trace.action_logp))[generated]
    self.assertLessEqual(error.max(), 1e-5)
    # Its logits scored in vocabulary chunks: the same log-probs.
    chunked = replay.replay_log_probs(
        self.model, trace, cached_logits_fn=cached_fn, logits_chunk=7
    )
    np.testing.assert_allclose(chunked, replayed, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(replayed[~generated], 0.0)
    own = np.asarray(replay.replay_logits(self.model, trace))
    free = np.asarray(
        replay.replay_logits(self.model, trace, cached_logits_fn=cached_fn)
    )
    np.testing.assert_allclose(free[generated], own[generated], atol=1e-4)

  def test_cache_free_replay_gradient_is_the_cached_ones(self):
    trace = _decode(self.model, _bd(), temperature=1.0).trace
    grads = [
        nnx.jit(
            nnx.grad(
                lambda model, fn=fn: replay.replay_log_probs(
                    model, trace, cached_logits_fn=fn
                ).sum()
            )
        )(self.model)
        for fn in (
            self.calls["cached_logits_fn"],
            cached_logits.block_logits_with_cache,
        )
    ]
    for free, cached in zip(*map(jax.tree.leaves, grads)):
      np.testing.assert_allclose(free, cached, rtol=1e-4, atol=1e-5)
    self.assertGreater(
        max(np.abs(g).max() for g in jax.tree.leaves(grads[0])), 0
    )

  def test_a_cache_free_call_refuses_a_cache(self):
    with self.assertRaisesRegex(ValueError, "no KV cache"):
      self.calls["cached_logits_fn"](self.model)

  def test_wrong_logits_shape_is_refused(self):
    bad = external_logits.model_calls(lambda model, inputs: jnp.zeros((1, 3)))
    with self.assertRaisesRegex(ValueError, "DiffusionLogitsFn returned"):
      _decode(self.model, _bd(), temperature=0.0, calls=bad)


class RolloutTest(absltest.TestCase):

  def test_rollout_through_the_cluster_replays_its_trace(self):
    calls = external_logits.model_calls(
        qwen3_logits_fn(rl_common.bd().block_size)
    )
    cluster = rl_common.cluster(reference="same", engine_kwargs=calls)
    own = rl_common.cluster(reference=None, use_cache=False)
    (item,) = rl_common.dataset(4, 4)
    prompts = list(item["prompts"])
    outs = []
    for c in (cluster, own):
      c.global_steps = 0
      outs.append(c.generate(prompts, mode=rl_cluster_lib.Mode.TRAIN))
    out = outs[0]
    for name in ("tokens", "action_step"):
      np.testing.assert_array_equal(
          getattr(out.trace, name), getattr(outs[1].trace, name)
      )
    generated = np.asarray(out.trace.action_step) >= 0
    recorded = np.asarray(out.trace.action_logp)
    for logps in (
        cluster.anchor_replay_logps(out.trace),
        cluster.reference_replay_logps(out.trace, micro_batch_size=2),
    ):
      self.assertLessEqual(np.abs(logps - recorded)[generated].max(), 1e-5)


class OpdTest(parameterized.TestCase):

  @parameterized.parameters(
      (sources.TRACE, bd_config.CLEAN_CONTEXT),
      (sources.CORRUPTED, bd_config.SINGLE_CANVAS),
  )
  def test_loss_equals_tunix_bds_own_call(self, canvas, layout):
    task = test_common.char_task_decoding(temperature=1.0, max_new_tokens=8)
    bd = dataclasses.replace(task.bd, layout=layout)
    vocab = tokenizer_lib.VOCAB_SIZE
    student = test_common.tiny_qwen3(vocab_size=vocab)
    teacher = test_common.tiny_qwen3(vocab_size=vocab, seed=1)
    calls = external_logits.model_calls(qwen3_logits_fn(bd.block_size))
    eos = task.tokenizer.eos_token_id
    corruption = corruption_lib.SftCorruptionConfig(
        min_noise=0.2, max_noise=0.9
    )
    source = sources.StudentRolloutSource(
        task.prompts,
        bd=bd,
        decode=task.config,
        canvas=canvas,
        batch_size=4,
        gradient_accumulation_steps=1,
        max_steps=1,
        seed=0,
        eos_id=eos,
        corruption=corruption,
        **calls,
    )
    out = source.rollout(student, 0)
    (batch,) = sources.rollout_batches(
        out.trace,
        step=0,
        canvas=canvas,
        stop_ids=(eos,),
        eos_id=eos,
        corruption=corruption,
    )
    losses = []
    for model_calls in (calls, {}):
      strategy = strategy_lib.DiffusionOpdStrategy(
          bd=bd, vocab_size=vocab, canvas=canvas, **model_calls
      )
      targets = strategy.get_teacher_outputs(teacher, {"batch": batch})
      # Compiled, not op by op: the same loss, a fraction of the time.
      loss_fn = lambda m, s=strategy, t=targets: s.get_train_loss(m, t, None)
      losses.append(nnx.jit(loss_fn)(student)[0])
    self.assertGreater(float(losses[1]), 0.0)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
