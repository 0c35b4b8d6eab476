# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.generate.decode_loop: every canvas geometry.

The loop's static geometry (`Layout`) has edge classes, each its own
compiled program: a canvas of one block (no earlier block to write to the
cache), a multi-block prompt followed by a single loop block (a prefill, no
cache write after it), and a prefill followed by many loop blocks, whose
rows also hold the runtime edges: prompts that end on a block boundary or
mid-block, completions ending in a partial final block. Each class, for
both alignments, holds docs/design.md's decoding invariants:

4. Cached decoding equals cache-free decoding: identical tokens and commit
   steps, log-probs within 1e-5 (float32), the same forwards per row; for
   every commit rule, greedy and stochastic, with a row that stops early.
5. Batch invariance: greedy decoding equals a brute-force reference that
   decodes each row alone at its logical positions, one full cache-free
   forward per step; and, in the many-block geometry, each row decoded
   alone gives exactly its batch row, greedy and seeded stochastic.

Each geometry compiles the decoder once per path (cached, cache-free):
rules, temperatures and stop ids are runtime values.
"""

import dataclasses
import functools

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.generate import canvas as canvas_lib
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd_tests import test_common

_MASK = 127
_STOP = 1
_THRESHOLD = 0.5
_QWEN3 = test_common.tiny_qwen3(vocab_size=128)

# name -> block size, prompts, max prompt length, max new tokens.
_GEOMETRIES = dict(
    # The repro: prompt and completion share the only block (row 2
    # fills it to its end, row 1 is a one-token prompt).
    one_block=(8, [[4, 9, 30], [8], [60, 2, 7, 11]], 4, 4),
    # Prompts to prefill, then five loop blocks (every fused write). Row 1's
    # prompt ends on a block boundary and its completion inside a partial
    # final block; rows 0 and 2 start mid-block.
    many_blocks=(2, [[7], [3, 50, 21, 9], [81, 6, 12]], 4, 9),
    # Prompt blocks to prefill, then a single loop block.
    one_loop_block_after_prompt=(
        4,
        [[13, 40, 2, 9, 77], [5, 6, 7, 8, 9, 10]],
        6,
        1,
    ),
)
_CASES = tuple(
    dict(
        testcase_name=f"{name}_{alignment}", geometry=name, alignment=alignment
    )
    for name in _GEOMETRIES
    for alignment in (bd_config.SAME_POSITION, bd_config.SHIFTED)
)


def _bd(geometry, alignment):
  return bd_config.BlockDiffusionConfig(
      block_size=_GEOMETRIES[geometry][0],
      mask_token_id=_MASK,
      alignment=alignment,
  )


# Rules and temperatures are runtime values: no recompiles. The first run
# is the brute-force reference's rule.
_RUNS = (
    dict(rule=commit_rules.THRESHOLD, threshold=_THRESHOLD, temperature=0.0),
    dict(rule=commit_rules.FACTOR, factor=1.5, temperature=0.0),
    dict(rule=commit_rules.THRESHOLD, threshold=0.4, temperature=1.0),
    dict(rule=commit_rules.TOP_K, top_k=2, temperature=0.7),
)
# Rows decoded alone too (a batch of one compiles once more per path): the
# geometry whose three rows start at three offsets in their first block and
# span up to five blocks. Same-position runs the cache-free path, shifted
# the cached one.
_SOLO = "many_blocks"
_SOLO_USE_CACHE = {bd_config.SAME_POSITION: False, bd_config.SHIFTED: True}


def _decode(geometry, alignment, use_cache, rows=None, stop_id=_STOP, **run):
  _, prompts, max_prompt_length, max_new_tokens = _GEOMETRIES[geometry]
  rows = range(len(prompts)) if rows is None else rows
  run = run or dict(_RUNS[0])
  config = denoise.DenoiseConfig(
      max_new_tokens=max_new_tokens,
      max_prompt_length=max_prompt_length,
      stop_ids=(stop_id,),
      use_cache=use_cache,
      **run,
  )
  out = denoise.Denoiser(_QWEN3, bd=_bd(geometry, alignment), config=config)(
      [prompts[r] for r in rows], seeds=[31 + r for r in rows]
  )
  out.trace.validate()
  return out


def _stop_id(geometry, alignment, use_cache, run):
  """Row 0's first completion token: row 0 stops in its first block."""
  out = _decode(geometry, alignment, use_cache, **run)
  return int(out.completion_tokens[0, 0])


def _assert_same_trace(cached, free) -> None:
  """Invariant 4 on two `DenoiseOutput`s of the same rows."""
  for name in ("tokens", "action_step"):
    np.testing.assert_array_equal(
        getattr(cached.trace, name), getattr(free.trace, name), err_msg=name
    )
  np.testing.assert_allclose(
      cached.trace.action_logp, free.trace.action_logp, atol=1e-5, rtol=0
  )
  np.testing.assert_array_equal(cached.num_forwards, free.num_forwards)
  # The cached path writes the cache within its denoising forwards: one
  # forward per step, a block's steps being its last commit step + 1.
  trace = cached.trace
  width = trace.action_step.shape[1]
  blocks = (
      trace.prompt_lengths[:, None] + np.arange(width)
  ) // trace.bd.block_size
  steps = [
      sum(a[b == k].max() + 1 for k in np.unique(b[a >= 0]))
      for a, b in zip(trace.action_step, blocks)
  ]
  np.testing.assert_array_equal(cached.num_forwards, steps)


@functools.partial(jax.jit, static_argnames="bd")
def _logits(graphdef, state, tokens, positions, segment_ids, *, bd):
  return diffusion_lm.diffusion_logits_fn(
      nnx.merge(graphdef, state), tokens, positions, segment_ids, config=bd
  )


# The reference's forwards are padded to one width (one compile per
# block size and alignment): the positions after a canvas are padding.
_WIDTH = 16


def _reference_greedy(prompt, bd, max_new_tokens):
  """One row decoded alone, greedy, threshold rule, no cache.

  Returns:
    int `[max_new_tokens]` completion, -1 where never generated.
  """
  size, length = bd.block_size, len(prompt)
  sequence = np.array(list(prompt) + [_MASK] * max_new_tokens, np.int32)
  width = len(sequence)
  padded = np.zeros(_WIDTH, np.int32)
  positions = np.arange(_WIDTH, dtype=np.int32)[None]
  single = dataclasses.replace(bd, layout=bd_config.SINGLE_CANVAS)
  generated_to = length
  for block in range(length // size, (width - 1) // size + 1):
    end = min((block + 1) * size, width)
    here = np.arange(max(block * size, length), end)
    while (sequence[here] == _MASK).any():
      # Later blocks are padding: the canvas ends with this block.
      segments = (np.arange(_WIDTH) < end).astype(np.int32)[None]
      padded[:width] = sequence
      logits = _logits(
          *nnx.split(_QWEN3), padded[None], positions, segments, bd=single
      )
      probs = np.asarray(jax.nn.softmax(logits[0], axis=-1))
      masked = here[sequence[here] == _MASK]
      confidence = probs[masked].max(axis=-1)
      commit = masked[confidence >= _THRESHOLD]
      if not len(commit):
        commit = masked[[np.argmax(confidence)]]
      sequence[commit] = probs[commit].argmax(axis=-1)
    generated_to = end
    if (sequence[here] == _STOP).any():
      break
  completion = sequence[length:].copy()
  completion[generated_to - length :] = -1
  return completion


class LayoutTest(parameterized.TestCase):

  def test_every_row_fits_the_shortest_canvas(self):
    for size in (1, 2, 3, 4, 8):
      for max_prompt_length in range(1, 10):
        for max_new_tokens in range(1, 10):
          layout = canvas_lib.Layout.create(
              size, max_prompt_length, max_new_tokens
          )
          total = max_prompt_length + max_new_tokens
          self.assertEqual(layout.length, -(-total // size) * size)
          lengths = np.arange(1, max_prompt_length + 1)
          prompts = np.ones((len(lengths), max_prompt_length), np.int32)
          canvas = canvas_lib.build_canvas(prompts, lengths, layout, _MASK)
          # Each row's completion lies in its loop blocks, in order.
          np.testing.assert_array_equal(
              canvas["completion"].sum(axis=1), max_new_tokens
          )
          self.assertTrue((canvas["num_blocks"] >= 1).all())
          self.assertTrue((canvas["num_blocks"] <= layout.blocks).all())
          for row, length in enumerate(lengths):
            logical = canvas["positions"][row][canvas["segments"][row] > 0]
            np.testing.assert_array_equal(
                logical, np.arange(length + max_new_tokens)
            )
            last = (length + max_new_tokens - 1) // size
            self.assertEqual(
                canvas["first_block"][row] + canvas["num_blocks"][row] - 1,
                last,
            )


class GeometryTest(parameterized.TestCase):

  @parameterized.named_parameters(*_CASES)
  def test_cached_equals_cache_free(self, geometry, alignment):
    size, prompts, _, max_new_tokens = _GEOMETRIES[geometry]
    # Row 0 spans more than one block: stopping in its first leaves slots
    # never generated while other rows may go on.
    spans = (len(prompts[0]) + max_new_tokens - 1) // size > (
        len(prompts[0]) // size
    )
    for run in _RUNS:
      with self.subTest(**run):
        stop_id = _stop_id(geometry, alignment, True, run)
        cached = _decode(geometry, alignment, True, stop_id=stop_id, **run)
        free = _decode(geometry, alignment, False, stop_id=stop_id, **run)
        if spans:
          self.assertTrue((cached.trace.action_step[0] < 0).any())
        _assert_same_trace(cached, free)

  @parameterized.named_parameters(*_CASES)
  def test_greedy_equals_a_brute_force_row_alone(self, geometry, alignment):
    _, prompts, _, max_new_tokens = _GEOMETRIES[geometry]
    out = _decode(geometry, alignment, use_cache=True)
    bd = _bd(geometry, alignment)
    for row, prompt in enumerate(prompts):
      want = _reference_greedy(prompt, bd, max_new_tokens)
      got = np.where(out.trace.action_step[row] >= 0, out.trace.tokens[row], -1)
      np.testing.assert_array_equal(got, want, err_msg=f"row {row}")

  @parameterized.parameters(bd_config.SAME_POSITION, bd_config.SHIFTED)
  def test_each_row_equals_its_solo_run(self, alignment):
    use_cache = _SOLO_USE_CACHE[alignment]
    rows = range(len(_GEOMETRIES[_SOLO][1]))
    for run in _RUNS:
      with self.subTest(**run):
        stop_id = _stop_id(_SOLO, alignment, use_cache, run)
        batch = _decode(_SOLO, alignment, use_cache, stop_id=stop_id, **run)
        for row in rows:
          solo = _decode(
              _SOLO, alignment, use_cache, rows=(row,), stop_id=stop_id, **run
          )
          for name in ("tokens", "action_step", "action_logp"):
            np.testing.assert_array_equal(
                getattr(solo.trace, name)[0],
                getattr(batch.trace, name)[row],
                err_msg=f"row {row} {name}",
            )
          self.assertEqual(solo.num_forwards[0], batch.num_forwards[row])


if __name__ == "__main__":
  absltest.main()
