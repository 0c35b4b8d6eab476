# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.replay on a tiny real Tunix Qwen3.

Traces come from a plain-Python denoiser over the cache-free single-canvas
forward (`_simulate`), independent of replay's packed cached layout.
"""

from __future__ import annotations

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import cached_logits
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import replay
from tunix_bd.core import replayer
from tunix_bd.core import scoring
from tunix_bd.core import trace as trace_lib
from tunix_bd.generate import denoise
from tunix_bd.models import precision
from tunix_bd_tests.core import replay_reference
from tunix_bd_tests import test_common

_VOCAB = 128
_MASK = 5  # A reserved id: never a prompt token, never sampled.
_PAD = 1
_BLOCK = 4
# Prompt lengths: aligned (8), inside a block (3, 6), a single token (1).
_PROMPT_LENGTHS = (8, 3, 6, 1)
# Rows end at logical 19, 14, 17, 12: rows 0-2 end in a partial block.
_COMPLETION_LEN = 11
# Completion blocks generated per row (None: all); rows 1-3 stop early, row
# 0 generates its partial final block.
_STOP_BLOCKS = (None, 1, 2, 2)

_QWEN3 = test_common.tiny_qwen3(vocab_size=_VOCAB, embed_dim=32)
_MODEL = test_common.JittedModel(_QWEN3)


def _config(alignment, block_size=_BLOCK):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )


def _prompts(rng, lengths):
  prompts = np.full((len(lengths), max(lengths)), _PAD, np.int32)
  for row, n in enumerate(lengths):
    ids = rng.integers(_MASK + 1, _VOCAB, n)
    prompts[row, :n] = ids
  return prompts


def _simulate(
    model,
    bd,
    *,
    temperature=1.0,
    greedy=False,
    rule="random",
    prompt_lengths=_PROMPT_LENGTHS,
    completion_len=_COMPLETION_LEN,
    stop_blocks=_STOP_BLOCKS,
    seed=0,
):
  """Records a trace by denoising block by block, cache-free.

  Each step runs one single-canvas forward over every row's logical
  sequence up to the end of the current block, then commits per row a
  random non-empty subset (`rule="random"`) or the positions with
  confidence >= 0.2, else the most confident one (`rule="confidence"`).

  Returns:
    A `Trace`; never-generated positions hold random garbage tokens.
  """
  rng = np.random.default_rng(seed)
  config = dataclasses.replace(bd, layout=bd_config.SINGLE_CANVAS)
  size = bd.block_size
  batch, length = len(prompt_lengths), max(prompt_lengths) + completion_len
  prompts = _prompts(rng, prompt_lengths)
  canvas = np.full((batch, length), _MASK, np.int32)
  ends = np.array(prompt_lengths) + completion_len
  tokens = rng.integers(0, _VOCAB, (batch, completion_len)).astype(np.int32)
  steps = np.full((batch, completion_len), -1, np.int32)
  logps = np.zeros((batch, completion_len), np.float32)
  last_block = np.zeros(batch, int)
  for row, start in enumerate(prompt_lengths):
    canvas[row, :start] = prompts[row, :start]
    blocks = range(start // size, -(-ends[row] // size))
    stop = stop_blocks[row]
    last_block[row] = blocks[-1] if stop is None else blocks[stop - 1]
  positions = np.broadcast_to(np.arange(length), (batch, length))
  sample_temperature = 1.0 if greedy else temperature
  for block in range(min(prompt_lengths) // size, last_block.max() + 1):
    here = (positions // size == block) & (positions < ends[:, None])
    here &= positions >= np.array(prompt_lengths)[:, None]
    here &= (block <= last_block)[:, None]
    visible = (positions < (block + 1) * size) & (positions < ends[:, None])
    for step in range(size):
      todo = here & (canvas == _MASK)
      if not todo.any():
        break
      logits = diffusion_lm.diffusion_logits_fn(
          model, canvas, positions, visible.astype(np.int32), config=config
      )
      logp = np.asarray(scoring.log_probs(logits, sample_temperature))
      for row in np.flatnonzero(todo.any(axis=1)):
        open_ = np.flatnonzero(todo[row])
        if rule == "random":
          commit = open_[rng.random(len(open_)) < 0.5]
          if not commit.size:
            commit = rng.choice(open_, 1)
        else:
          confidence = np.exp(logp[row, open_].max(axis=-1))
          commit = open_[confidence >= 0.2]
          if not commit.size:
            commit = open_[[np.argmax(confidence)]]
        for i in commit:
          if greedy:
            token = int(np.argmax(logp[row, i]))
          else:
            p = np.exp(logp[row, i].astype(np.float64))
            token = int(rng.choice(_VOCAB, p=p / p.sum()))
          j = i - prompt_lengths[row]
          canvas[row, i] = tokens[row, j] = token
          steps[row, j] = step
          logps[row, j] = logp[row, i, token]
  return trace_lib.Trace(
      prompt_tokens=prompts,
      prompt_lengths=np.array(prompt_lengths, np.int32),
      tokens=tokens,
      action_step=steps,
      action_logp=logps,
      temperature=sample_temperature,
      bd=bd,
  ).validate()


_CALLS = []


class _CountingModel(nnx.Module):
  """A Qwen3 that records the query width of each executed forward.

  Also inside `lax.scan` / `cond`.
  """

  def __init__(self, model):
    self.model = model
    self.config = model.config

  def __call__(self, tokens, positions, cache, mask):
    width = tokens.shape[1]
    jax.debug.callback(lambda: _CALLS.append(width))
    return self.model(tokens, positions, cache, mask)


# Compiled replay counts its forwards: every test shares its compiles.
_COUNTED = _CountingModel(_QWEN3)


def _replay(trace, **kwargs):
  """Compiled replay; returns NumPy log-probs (and counts the forwards)."""
  _CALLS.clear()
  got = replayer.Replayer(_COUNTED, **kwargs)(trace)
  got = np.asarray(got)
  jax.effects_barrier()
  return got


def _replay_shaped(trace, **shape):
  """`_replay` with a given static shape (`num_canvases`, `context_length`)."""
  _CALLS.clear()
  scores = jax.jit(lambda t: replay.replay_log_probs(_COUNTED, t, **shape))(
      trace
  )
  jax.effects_barrier()
  return np.asarray(scores)


class ReplayTest(parameterized.TestCase):

  # Two (alignment, temperature) pairs: each compiles replay once.
  @parameterized.named_parameters(
      ("shifted_t07_random", bd_config.SHIFTED, 0.7, False, "random"),
      ("shifted_t07_confidence", bd_config.SHIFTED, 0.7, False, "confidence"),
      (
          "same_position_t1_random",
          bd_config.SAME_POSITION,
          1.0,
          False,
          "random",
      ),
      (
          "same_position_greedy",
          bd_config.SAME_POSITION,
          1.0,
          True,
          "confidence",
      ),
  )
  def test_replay_reproduces_recorded_log_probs(
      self, alignment, temperature, greedy, rule
  ):
    bd = _config(alignment)
    trace = _simulate(
        _MODEL, bd, temperature=temperature, greedy=greedy, rule=rule, seed=1
    )
    steps = trace.action_step
    # The setup covers what it claims: early stops, several steps a block.
    self.assertTrue((steps[1] == -1).any() and (steps[3] == -1).any())
    self.assertTrue((steps[0] >= 0).all())
    self.assertGreater(steps.max(), 0)
    self.assertEqual(trace.temperature, temperature)

    got = np.asarray(_replay(trace))
    generated = steps >= 0
    np.testing.assert_allclose(
        got[generated], trace.action_logp[generated], atol=1e-5, rtol=0
    )
    np.testing.assert_array_equal(got[~generated], 0.0)
    reference = replay_reference.brute_force_log_probs(_MODEL, trace)
    np.testing.assert_allclose(got, reference, atol=1e-5, rtol=0)

  def test_reference_reproduces_recorded_log_probs(self):
    bd = _config(bd_config.SHIFTED, block_size=3)
    trace = _simulate(_MODEL, bd, temperature=0.7, seed=3)
    got = replay_reference.brute_force_log_probs(_MODEL, trace)
    np.testing.assert_allclose(got, trace.action_logp, atol=1e-5, rtol=0)

  def test_scoring_at_another_temperature(self):
    bd = _config(bd_config.SHIFTED)
    trace = _simulate(_MODEL, bd, temperature=1.0, seed=4)
    hotter = trace.replace(temperature=0.7)
    got = _replay(hotter)
    want = replay_reference.brute_force_log_probs(_MODEL, hotter)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    generated = trace.action_step >= 0
    error = np.abs(got - trace.action_logp)[generated]
    self.assertGreater(error.max(), 1e-3)

  @parameterized.parameters(bd_config.SHIFTED, bd_config.SAME_POSITION)
  def test_packed_equals_unpacked_in_one_forward(self, alignment):
    # Rows that stop after one block, after two, and run to the end.
    trace = _simulate(
        _MODEL, _config(alignment), temperature=0.7, rule="random", seed=5
    )
    got = _replay(trace)
    # One group of canvases: scored with the clean context in one forward.
    self.assertLessEqual(
        canvases.count_canvases(trace), canvases.group_size(_BLOCK)
    )
    self.assertEqual(
        _CALLS,
        [
            canvases.static_context_length(trace)
            + canvases.static_num_canvases(trace) * _BLOCK
        ],
    )
    want = np.asarray(replay_reference.unpacked_log_probs(_MODEL, trace))
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got, trace.action_logp, atol=1e-5, rtol=0)

  @parameterized.parameters(bd_config.SHIFTED, bd_config.SAME_POSITION)
  def test_many_groups_score_against_the_cached_context(self, alignment):
    # Room for two groups of canvases.
    trace = _simulate(
        _MODEL,
        _config(alignment),
        completion_len=19,
        stop_blocks=(None, 4, 5, 2),
        temperature=0.7,
        seed=5,
    )
    group = canvases.group_size(_BLOCK)
    context = canvases.static_context_length(trace)
    got = _replay_shaped(trace, num_canvases=2 * group, context_length=context)
    # A forward writes the context to the cache, then one per group that
    # holds a canvas (groups past every row's last canvas are skipped).
    occupied = -(-canvases.count_canvases(trace) // group)
    self.assertEqual(_CALLS, [context] + [group * _BLOCK] * occupied)
    want = replay_reference.brute_force_log_probs(_MODEL, trace)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)

  def test_context_is_the_positions_before_each_rows_last_block(self):
    trace = _simulate(
        _MODEL, _config(bd_config.SHIFTED), stop_blocks=_STOP_BLOCKS, seed=2
    )
    last = [
        length + np.flatnonzero(steps >= 0).max()
        for length, steps in zip(trace.prompt_lengths, trace.action_step)
    ]
    need = int(max(position // _BLOCK * _BLOCK for position in last))
    self.assertEqual(canvases.context_length(trace), need)
    self.assertEqual(canvases.static_context_length(trace), need)
    # Positions past it are never attended: a longer context scores alike.
    whole = len(trace.prompt_tokens[0]) + len(trace.tokens[0])  # 8 + 11.
    count = canvases.static_num_canvases(trace)
    longer = _replay_shaped(trace, num_canvases=count, context_length=whole)
    self.assertEqual(_CALLS, [20 + count * _BLOCK])  # In whole blocks.
    np.testing.assert_allclose(longer, _replay(trace), atol=1e-5, rtol=0)
    with self.assertRaisesRegex(
        ValueError, rf"context_length={need - 1} is too small"
    ):
      replay.replay_log_probs(_MODEL, trace, context_length=need - 1)

  @parameterized.parameters(
      (1, 1), (2, 2), (3, 4), (5, 8), (16, 16), (17, 32), (33, 48)
  )
  def test_canvas_counts_round_to_a_bucket(self, count, bucket):
    # Block 4: groups of 16 canvases; a power of two below one group.
    self.assertEqual(canvases.group_size(_BLOCK), 16)
    self.assertEqual(canvases.canvas_bucket(count, _BLOCK), bucket)
    trace = _simulate(_MODEL, _config(bd_config.SHIFTED), seed=5)
    self.assertEqual(
        canvases.static_num_canvases(trace),
        canvases.canvas_bucket(canvases.count_canvases(trace), _BLOCK),
    )

  def test_a_replayer_scores_under_a_given_state(self):
    trace = _simulate(_MODEL, _config(bd_config.SHIFTED), seed=9)
    other = test_common.tiny_qwen3(vocab_size=_VOCAB, embed_dim=32, seed=1)
    replay_of = replayer.Replayer(_QWEN3)
    # Another state of the same structure, without a new Replayer (RL's
    # start-of-step snapshot); the model's own state again after it.
    np.testing.assert_allclose(
        replay_of(trace, state=nnx.state(other)),
        replayer.Replayer(other)(trace),
        atol=1e-6,
        rtol=0,
    )
    np.testing.assert_allclose(
        replay_of(trace), trace.action_logp, atol=1e-5, rtol=0
    )

  def test_an_injected_logits_fn_changes_exactly_its_scores(self):
    bd = _config(bd_config.SHIFTED)
    trace = _simulate(_MODEL, bd, temperature=0.7, seed=8)
    row, slot = 0, 5  # Bias the predictor of row 0's completion slot 5.
    position = int(trace.prompt_lengths[row]) + slot
    token = int(trace.tokens[row, slot])
    bias = 3.0

    def biased(model, tokens, positions, segment_ids, cache, **kwargs):
      logits, cache = cached_logits.block_logits_with_cache(
          model, tokens, positions, segment_ids, cache, **kwargs
      )
      here = (positions == position) & (jnp.arange(len(tokens)) == row)[:, None]
      return logits.at[..., token].add(jnp.where(here, bias, 0.0)), cache

    plain = _replay(trace)
    got = _replay(trace, cached_logits_fn=biased)
    changed = np.abs(got - plain) > 1e-6
    want = np.zeros_like(changed)
    want[row, slot] = True
    np.testing.assert_array_equal(changed, want)
    # log p' = log p + b/T - log(1 - p + p e^{b/T}) at the biased token.
    scale = bias / trace.temperature
    p = np.exp(plain[row, slot])
    expected = plain[row, slot] + scale - np.log1p(p * np.expm1(scale))
    self.assertAlmostEqual(got[row, slot], expected, delta=1e-5)

  def test_replays_the_cached_denoiser_stochastic_trace(self):
    bd = _config(bd_config.SHIFTED)
    config = denoise.DenoiseConfig(
        max_new_tokens=_COMPLETION_LEN,
        max_prompt_length=max(_PROMPT_LENGTHS),
        rule="threshold",
        threshold=0.3,
        temperature=0.7,
        stop_ids=(27,),
        pad_id=_PAD,
        use_cache=True,
    )
    prompts = _prompts(np.random.default_rng(0), _PROMPT_LENGTHS)
    out = denoise.Denoiser(_QWEN3, bd=bd, config=config)(
        prompts, np.array(_PROMPT_LENGTHS), seeds=np.arange(4)
    )
    trace = out.trace
    steps = trace.action_step
    # Some rows stopped early, others ran to the end; blocks took steps.
    self.assertTrue((steps == -1).any(axis=1).any())
    self.assertTrue((steps >= 0).all(axis=1).any())
    self.assertGreater(steps.max(), 0)

    self.assertLessEqual(replayer.max_replay_error(_COUNTED, trace), 1e-5)
    got = _replay(trace)
    np.testing.assert_allclose(got, trace.action_logp, atol=1e-5, rtol=0)
    logp = trace.action_logp.copy()
    logp[0, 0] -= 0.25
    error = replayer.max_replay_error(_COUNTED, trace.replace(action_logp=logp))
    self.assertAlmostEqual(error, 0.25, delta=1e-5)

  def test_invalid_traces_fail_closed(self):
    bd = _config(bd_config.SHIFTED)
    trace = _simulate(_MODEL, bd, temperature=0.7, seed=9)

    def check(regex, **changes):
      bad = trace.replace(**changes)
      with self.assertRaisesRegex(ValueError, regex):
        replay.replay_log_probs(_MODEL, bad)

    steps = trace.action_step
    check(r"action_step must have shape", action_step=steps[:, :-1])
    check(r"action_logp must have shape", action_logp=trace.action_logp[:2])
    check(r"action_logp must be a float", action_logp=steps)
    check(r"prompt_lengths must have shape", prompt_lengths=np.array([3, 4]))
    check(r"tokens must have shape", tokens=trace.tokens[:3])
    check(r"prompt_tokens is empty", prompt_tokens=trace.prompt_tokens[:, :0])
    check(
        r"prompt_lengths must be in \[1, 8\]",
        prompt_lengths=np.array([9, 3, 6, 1]),
    )
    lengths = np.array([8, 0, 6, 1], np.int32)
    check(r"prompt_lengths.*shifted.*empty prompt", prompt_lengths=lengths)
    same = _config(bd_config.SAME_POSITION)
    check(r"prompt_lengths must be in", prompt_lengths=lengths, bd=same)
    check(r"action_step must be in \[-1, block_size=4\)", action_step=steps + 4)
    middle = steps.copy()
    middle[0, 1] = -1  # Row 0's first completion block is slots 0..3.
    check(r"action_step of row 0 has -1 in the middle", action_step=middle)
    resumed = steps.copy()
    resumed[0, :4] = -1
    check(r"row 0 generates completion block 1 after", action_step=resumed)
    masked = trace.tokens.copy()
    masked[0, 0] = _MASK
    check(r"tokens commits the mask token", tokens=masked)
    outside = trace.tokens.copy()
    outside[0, 0] = _VOCAB
    check(r"ids outside the model vocabulary", tokens=outside)
    check(r"temperature must be a finite number", temperature=0.0)
    check(r"bd must be a BlockDiffusionConfig", bd=bd.to_dict())
    with self.assertRaisesRegex(ValueError, r"num_canvases=1 is too small"):
      replay.replay_log_probs(_MODEL, trace, num_canvases=1)
    with self.assertRaisesRegex(ValueError, r"trace must be a tunix_bd"):
      replay.replay_log_probs(_MODEL, object())


class BfloatReplayTest(absltest.TestCase):
  """Replay parity (docs/design.md invariant 6) under `model.dtype=bfloat16`."""

  def test_a_bfloat16_rollout_replays_within_bfloat16_rounding(self):
    # bf16 keeps 8 significant bits. The rollout's cached block forwards
    # and replay's packed ones may sum in other orders (other XLA fusions),
    # so an activation may round to its neighbouring bf16 value: the
    # actions that attend to it then move by about an ulp of the logits
    # (these models' are below 8: 2^-5 an ulp), the others replay exactly.
    config = test_common.tiny_qwen3_config(_VOCAB)
    bf16 = precision.Precision(dtype="bfloat16").model_config(config)
    bd = _config(bd_config.SHIFTED)
    errors = {}
    for name, model_config in (("bfloat16", bf16), ("float32", config)):
      model = test_common.init_qwen3(model_config, seed=3)
      if name == "bfloat16":
        trace = test_common.sampled_trace(
            model, bd, stop_id=_MASK + 1, pad_id=_PAD, new_tokens=16
        )
        generated = trace.action_step >= 0
      got = np.asarray(replayer.Replayer(model)(trace))
      errors[name] = np.abs(got - trace.action_logp)[generated]
    self.assertLessEqual(errors["bfloat16"].max(), 2**-4)
    self.assertLessEqual(np.median(errors["bfloat16"]), 1e-5)
    # The tolerance tells precisions apart: the same weights in float32
    # replay the bf16 rollout's actions off by ~1e-2.
    self.assertGreater(np.median(errors["float32"]), 1e-3)


def _rel(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


class ChunkedReplayTest(parameterized.TestCase):
  """`logits_chunk`: the head in vocabulary chunks on replayed hidden rows.

  Also replay's gradients, as in an RL step: compiled, the trace's arrays
  traced, every parameter's gradient finite and non-zero.
  """

  # One group with the context in the same forward (chunk 128, the whole
  # vocabulary), and many groups against the cached context (chunk 24,
  # which does not divide it).
  @parameterized.parameters(
      (bd_config.SAME_POSITION, None, 128),
      (bd_config.SHIFTED, 2, 24),
  )
  def test_equals_the_dense_replay_and_its_gradients(
      self, alignment, groups, chunk
  ):
    trace = _simulate(
        _MODEL,
        _config(alignment),
        completion_len=19 if groups else _COMPLETION_LEN,
        stop_blocks=(None, 4, 5, 2) if groups else _STOP_BLOCKS,
        temperature=0.7,
        seed=5,
    )
    shape = {}
    if groups:
      shape = dict(
          num_canvases=groups * canvases.group_size(_BLOCK),
          context_length=canvases.static_context_length(trace),
      )
    weights = np.random.default_rng(0).standard_normal(trace.tokens.shape)

    # Dense and chunked, with their gradients, and the rows and the logits:
    # one compiled program (the checks do not need them apart).
    @nnx.jit
    def replayed(model, trace):
      def value_and_grad(logits_chunk):
        def loss(model):
          logp = replay.replay_log_probs(
              model, trace, logits_chunk=logits_chunk, **shape
          )
          return jnp.sum(weights * logp), logp

        return nnx.value_and_grad(loss, has_aux=True)(model)

      return (
          value_and_grad(None),
          value_and_grad(chunk),
          replay.replay_rows(model, trace, **shape),
          replay.replay_logits(model, trace, **shape),
      )

    dense, chunked, rows, logits = replayed(_QWEN3, trace)
    (value, want), want_grads = dense
    (_, got), got_grads = chunked
    self.assertTrue(np.isfinite(float(value)))
    self.assertLess(_rel(got, want), 1e-6)
    np.testing.assert_array_equal(got[trace.action_step < 0], 0.0)
    np.testing.assert_allclose(got, trace.action_logp, atol=1e-5, rtol=0)
    for want_leaf, got_leaf in zip(
        jax.tree.leaves(nnx.to_pure_dict(want_grads)),
        jax.tree.leaves(nnx.to_pure_dict(got_grads)),
    ):
      self.assertLess(_rel(got_leaf, want_leaf), 1e-6)
    flat = nnx.to_flat_state(nnx.state(want_grads, nnx.Param))
    self.assertNotEmpty(flat)
    for path, leaf in flat:
      leaf = np.asarray(leaf.get_value())
      self.assertTrue(np.isfinite(leaf).all(), path)
      self.assertGreater(np.abs(leaf).max(), 0.0, path)
    # The rows themselves: the head maps them to `replay_logits`.
    self.assertIsNotNone(rows.head)
    generated = trace.action_step >= 0
    # `replay_logits` are the distributions `replay_log_probs` scores.
    logits = np.asarray(logits)
    self.assertEqual(logits.shape, trace.tokens.shape + (_VOCAB,))
    np.testing.assert_array_equal(logits[~generated], 0.0)
    logp = scoring.token_log_probs(logits, trace.tokens, trace.temperature)
    logp = np.where(generated, logp, 0.0)
    np.testing.assert_allclose(logp, want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        np.asarray(lm_head.dense_logits(rows))[generated],
        logits[generated],
        atol=1e-5,
        rtol=0,
    )

  def test_an_injected_cached_logits_fn_works_with_the_chunked_head(self):
    # A call of its own that gives logits: scored in chunks, the same.
    trace = _simulate(_MODEL, _config(bd_config.SHIFTED), seed=2)
    injected = lambda *args, **kwargs: cached_logits.block_logits_with_cache(
        *args, **kwargs
    )
    got = replay.replay_log_probs(
        _QWEN3, trace, logits_chunk=8, cached_logits_fn=injected
    )
    np.testing.assert_allclose(got, trace.action_logp, atol=1e-5, rtol=0)


if __name__ == "__main__":
  absltest.main()
