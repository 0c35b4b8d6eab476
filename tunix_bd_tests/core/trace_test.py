# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.trace and tunix_bd.core.canvases on real rollouts."""

from __future__ import annotations

import functools

from absl.testing import absltest
import jax
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import trace as trace_lib
from tunix_bd.generate import denoise
from tunix_bd_tests import test_common
from tunix_bd_tests.core import replay_reference

_VOCAB = 96
_MASK = 2
_PAD = 0
_STOP = 11
_MODEL = test_common.tiny_qwen3(vocab_size=_VOCAB, seed=3)
_BD = bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=_MASK)


def _rollout(prompts, use_cache=True, logits_fn=None):
  config = denoise.DenoiseConfig(
      max_new_tokens=13,
      max_prompt_length=9,
      threshold=0.35,
      temperature=0.9,
      stop_ids=(_STOP,),
      pad_id=_PAD,
      use_cache=use_cache,
  )
  kwargs = {} if logits_fn is None else dict(logits_fn=logits_fn)
  denoiser = denoise.Denoiser(_MODEL, bd=_BD, config=config, **kwargs)
  return denoiser(prompts, seeds=np.arange(len(prompts)) + 7)


def _prompts(lengths, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.integers(_STOP + 1, _VOCAB, n).tolist() for n in lengths]


# Prompt lengths of the shared rollout: rows start at every offset of their
# first block, some stop early, some generate every block.
_LENGTHS = (9, 3, 6, 1)


@functools.cache
def _trace():
  """The cached rollout of `_LENGTHS` most tests read (one compile)."""
  return _rollout(_prompts(_LENGTHS)).trace


class TunixLayoutTest(absltest.TestCase):

  def test_a_rollout_in_the_tunix_layout(self):
    prompts = _prompts(_LENGTHS)
    trace = _trace()
    self.assertTrue((trace.action_step < 0).any())  # Some rows stopped.
    fields = trace_lib.to_tunix_layout(trace, pad_id=_PAD)
    width = fields["prompt_ids"].shape[1]
    for row, prompt in enumerate(prompts):
      n = len(prompt)
      # Left-padded prompts, right-padded completions.
      np.testing.assert_array_equal(
          fields["prompt_ids"][row, width - n :], prompt
      )
      np.testing.assert_array_equal(
          fields["prompt_ids"][row, : width - n], _PAD
      )
      np.testing.assert_array_equal(
          fields["prompt_mask"][row], np.arange(width) >= width - n
      )
    np.testing.assert_array_equal(
        fields["completion_mask"], trace.action_step >= 0
    )
    np.testing.assert_array_equal(
        fields["completion_ids"][~fields["completion_mask"]], _PAD
    )
    generated = fields["completion_mask"]
    np.testing.assert_array_equal(
        fields["completion_ids"][generated], trace.tokens[generated]
    )


class ValidateTest(absltest.TestCase):

  def test_the_stop_rule(self):
    trace = _trace()
    trace.validate(stop_ids=(_STOP,))
    steps = trace.action_step
    stopped = np.flatnonzero((steps < 0).any(axis=1))
    self.assertNotEmpty(stopped)
    # A row that generated every block cannot lose its last one...
    full = np.flatnonzero((steps >= 0).all(axis=1))[0]
    blocks = trace_lib.completion_blocks(
        trace.prompt_lengths, steps.shape[1], _BD.block_size
    )
    cut = steps.copy()
    cut[full, blocks[full] == blocks[full].max()] = -1
    with self.assertRaisesRegex(ValueError, "left masked positions"):
      trace.replace(action_step=cut).validate(stop_ids=(_STOP,))
    # ... and without its stop token, a stopped row has stopped too early.
    tokens = trace.tokens.copy()
    tokens[tokens == _STOP] = _STOP + 1
    with self.assertRaisesRegex(ValueError, f"rows \\[{stopped[0]}"):
      trace.replace(tokens=tokens).validate(stop_ids=(_STOP,))

  def test_static_checks_run_under_jit(self):
    trace = _trace()

    @jax.jit
    def check(trace):
      trace.validate()
      return trace.action_logp.sum()

    check(trace)
    with self.assertRaisesRegex(ValueError, "action_step must have shape"):
      check(trace.replace(action_step=trace.action_step[:, 1:]))


class StepCanvasTest(absltest.TestCase):

  def test_step_canvases_equal_the_denoisers_at_every_step(self):
    seen = []

    # One function for every rollout: one compiled decoder.
    def recording(model, tokens, positions, segment_ids, **kwargs):
      jax.debug.callback(
          lambda *a: seen.append([np.asarray(x)[0] for x in a]),
          tokens,
          positions,
          segment_ids,
          ordered=True,
      )
      return diffusion_lm.diffusion_logits_fn(
          model, tokens, positions, segment_ids, **kwargs
      )

    for length in (9, 3, 1):  # One row per rollout: forwards are in order.
      seen.clear()
      out = _rollout(_prompts((length,), seed=length), False, recording)
      jax.effects_barrier()
      trace = out.trace
      rows = canvases.sequence(trace)
      seq_position = np.asarray(rows.positions)[0]
      clean = np.asarray(rows.tokens)[0]
      blocks = seq_position // _BD.block_size
      generated = trace.action_step[0] >= 0
      slot_block = seq_position[-generated.size :] // _BD.block_size
      order = [
          (b, s)
          for b in np.unique(slot_block[generated])
          for s in range(trace.action_step[0][slot_block == b].max() + 1)
      ]
      self.assertLen(seen, len(order))
      self.assertGreater(len(order), len(np.unique(blocks)))
      for (block, step), (tokens, positions, segments) in zip(order, seen):
        # The denoiser's physical canvas, read in logical order.
        logical = dict(zip(positions[segments > 0], tokens[segments > 0]))
        real = np.asarray(rows.segment_ids)[0] > 0
        want = np.asarray(replay_reference.step_canvas(trace, step))[0]
        for i in np.flatnonzero(real & (blocks <= block)):
          expected = want[i] if blocks[i] == block else clean[i]
          self.assertEqual(logical[seq_position[i]], expected, (block, step))

  def test_clean_context_holds_each_rows_positions_in_order(self):
    trace = _trace()
    rows = canvases.sequence(trace)
    length = canvases.context_length(trace) + 3  # Past it: pads and more.
    context = canvases.clean_context(trace, length)
    np.testing.assert_array_equal(
        context.positions, np.broadcast_to(np.arange(length), (4, length))
    )
    for row in range(4):
      tokens = lambda seq, r=row: {
          int(p): int(t)
          for p, t, s in zip(
              seq.positions[r], seq.tokens[r], seq.segment_ids[r]
          )
          if s > 0 and p < length
      }
      self.assertEqual(tokens(context), tokens(rows))
    # Each row's last generated block starts at most at the context's end.
    steps = trace.action_step
    last = trace.prompt_lengths + (steps >= 0).sum(axis=1) - 1
    self.assertEqual(
        canvases.context_length(trace),
        int((last // _BD.block_size).max()) * _BD.block_size,
    )

  def test_packed_canvases_score_each_slot_once(self):
    trace = _trace()
    count = canvases.count_canvases(trace)
    packed = canvases.packed_canvases(trace, count + 2)
    scored = np.asarray(packed.scored)
    slots = np.asarray(packed.slot)
    for row in range(len(scored)):
      np.testing.assert_array_equal(
          np.sort(slots[row][scored[row]]),
          np.flatnonzero(trace.action_step[row] >= 0),
      )
    # Canvas ids count each row's canvases: the most is `count_canvases`.
    real = np.asarray(packed.segment_ids) > 0
    self.assertEqual(count, int(np.asarray(packed.canvas_ids)[real].max()))


if __name__ == "__main__":
  absltest.main()
