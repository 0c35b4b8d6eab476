# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The student-rollout source: stop weights, corruption, prompts, determinism.

docs/design.md "OPD invariants" 13 (stop weights), 17 (corrupted
canvases) and docs/design.md invariant 7 (resume: rollouts are a function
of (seed, step)), plus the multi-turn rule and the bad inputs that must fail before
any compute.
"""

import types

from absl.testing import absltest
import jax
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import trace as trace_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import sources
from tunix_bd.generate import denoise
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd_tests import test_common

_MASK, _STOP, _PAD = 2, 7, 0
_BD = bd_config.BlockDiffusionConfig(block_size=2, mask_token_id=_MASK)
_NOISE = corruption_lib.SftCorruptionConfig(
    min_noise=0.3, max_noise=0.8, seed=4
)


def _trace(prompts, lengths, tokens, steps, bd=_BD):
  tokens = np.asarray(tokens, np.int32)
  return trace_lib.Trace(
      prompt_tokens=np.asarray(prompts, np.int32),
      prompt_lengths=np.asarray(lengths, np.int32),
      tokens=tokens,
      action_step=np.asarray(steps, np.int32),
      action_logp=np.where(np.asarray(steps) >= 0, -0.5, 0.0).astype(
          np.float32
      ),
      bd=bd,
  ).validate(stop_ids=(_STOP,))


def _batch(trace, canvas=sources.TRACE, step=0, k=1):
  return sources.rollout_batches(
      trace,
      step=step,
      canvas=canvas,
      stop_ids=(_STOP,),
      eos_id=_STOP,
      corruption=_NOISE,
      num_micro_batches=k,
  )


class StopWeightsTest(absltest.TestCase):

  def test_maxtext_example_weights_the_stop_token_and_nothing_after(self):
    # Prompt [3, 4], completion [7, 8], stop 7: row weights [0, 0, 1, 0].
    (batch,) = _batch(_trace([[3, 4]], [2], [[7, 8]], [[0, 1]]))
    row = np.concatenate([np.zeros(2), batch.weights[0]])
    np.testing.assert_array_equal(row, [0, 0, 1, 0])
    np.testing.assert_array_equal(batch.input_tokens[0], [3, 4, 7, 8])

  def test_unstopped_rows_weight_every_slot_and_ungenerated_slots_none(self):
    trace = _trace(
        [[3, 4], [5, 6]],
        [2, 2],
        [[9, 7, _PAD, _PAD], [9, 10, 11, 12]],
        [[1, 0, -1, -1], [0, 0, 1, 0]],
    )
    (batch,) = _batch(trace)
    np.testing.assert_array_equal(batch.weights, [[1, 1, 0, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(
        sources.stop_weights(trace.tokens, trace.action_step, (_STOP,)),
        batch.weights,
    )

  def test_micro_batches_carry_the_global_weight(self):
    trace = _trace(
        [[3, 4], [5, 6]], [2, 2], [[9, 7], [9, 10]], [[1, 0], [0, 0]]
    )
    first, second = _batch(trace, k=2)
    np.testing.assert_array_equal(first.global_weight, [4.0])
    np.testing.assert_array_equal(second.global_weight, [4.0])
    np.testing.assert_array_equal(first.accumulation_steps, [2])

  def test_micro_batches_carry_their_rows_of_the_recorded_trace(self):
    trace = _trace(
        [[3, 4], [5, 6]], [2, 2], [[9, 7], [9, 10]], [[1, 0], [0, 0]]
    )
    for row, batch in enumerate(_batch(trace, k=2)):
      self.assertEqual(batch.trace.bd, trace.bd)
      for name in ("prompt_tokens", "prompt_lengths", "tokens", "action_step"):
        np.testing.assert_array_equal(
            getattr(batch.trace, name), getattr(trace, name)[row : row + 1]
        )
      # The rollout's own log-probs ride along; nothing is zero-filled.
      np.testing.assert_array_equal(batch.trace.action_logp, [[-0.5, -0.5]])


class CorruptedCanvasTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    rows, prompts, lengths, tokens, steps = 32, [], [], [], []
    for _ in range(rows):
      length = int(rng.integers(1, 4))
      prompts.append(list(rng.integers(10, 30, 3)))
      lengths.append(length)
      completion = list(rng.integers(10, 30, 6))
      stop = int(rng.integers(0, 8))  # >= 6: the row never stops.
      if stop < 6:
        completion[stop] = _STOP
      blocks = (length + np.arange(6)) // 2 - length // 2
      last = blocks[stop] if stop < 6 else blocks[-1]
      step = np.where(blocks <= last, 0, -1)
      completion = np.where(step >= 0, completion, _PAD)
      tokens.append(completion)
      steps.append(step)
    self.trace = _trace(prompts, lengths, tokens, steps)

  def test_prompts_untouched_stop_block_eos_filled_deterministic(self):
    (batch,) = _batch(self.trace, sources.CORRUPTED, step=3)
    width = 3
    noisy, clean = batch.noisy_tokens, batch.input_tokens
    prompt = batch.positions < batch.trace.prompt_lengths[:, None]
    np.testing.assert_array_equal(noisy[prompt], clean[prompt])
    self.assertNotIn(_MASK, noisy[prompt])
    completion = clean[:, width:]
    generated = batch.trace.action_step >= 0
    first = np.argmax(self.trace.tokens == _STOP, axis=1)
    stopped = (self.trace.tokens == _STOP).any(axis=1)
    for r in np.flatnonzero(stopped):
      after = generated[r] & (np.arange(6) > first[r])
      self.assertTrue((completion[r][after] == _STOP).all())
    masked = noisy[:, width:] == _MASK
    self.assertTrue(masked.any())
    self.assertFalse((masked & ~generated).any())
    np.testing.assert_array_equal(
        batch.weights > 0,
        masked
        & (
            sources.stop_weights(
                self.trace.tokens, self.trace.action_step, (_STOP,)
            )
            > 0
        ),
    )
    (again,) = _batch(self.trace, sources.CORRUPTED, step=3)
    np.testing.assert_array_equal(again.noisy_tokens, noisy)
    (other,) = _batch(self.trace, sources.CORRUPTED, step=4)
    self.assertFalse((other.noisy_tokens == noisy).all())


class PromptsTest(absltest.TestCase):

  def test_multi_turn_keeps_earlier_turns_and_drops_later_ones(self):
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
        {"role": "user", "content": "a later turn"},
    ]
    prompt, answer = prompts_lib.prompt_messages(messages, "row 1")
    self.assertEqual(prompt, messages[:3])
    self.assertEqual(answer, "d")

  def test_rows_without_completion_or_prompt_fail_naming_the_row(self):
    with self.assertRaisesRegex(ValueError, "row 7: .*no completion span"):
      prompts_lib.prompt_messages([{"role": "user", "content": "x"}], "row 7")
    with self.assertRaisesRegex(ValueError, "row 8: .*no prompt"):
      prompts_lib.prompt_messages(
          [{"role": "assistant", "content": "x"}], "row 8"
      )


class SourceTest(absltest.TestCase):

  def _source(self, **overrides):
    tokenizer = tokenizer_lib.build_char_tokenizer()
    mix = dataset_lib.tasks_lib.TaskMix(max_len=3)
    prompts = prompts_lib.encode_prompts(
        tokenizer, dataset_lib.embedded_conversations(mix, "train", 10), 32
    )
    settings = dict(
        bd=bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3),
        decode=denoise.DenoiseConfig(
            max_new_tokens=8,
            max_prompt_length=32,
            temperature=1.0,
            stop_ids=(tokenizer.eos_token_id,),
            pad_id=tokenizer.pad_token_id,
        ),
        canvas=sources.CORRUPTED,
        batch_size=3,
        gradient_accumulation_steps=2,
        max_steps=2,
        seed=5,
        eos_id=tokenizer.eos_token_id,
        corruption=corruption_lib.SftCorruptionConfig(),
    )
    settings.update(overrides)
    return sources.StudentRolloutSource(prompts, **settings)

  def test_rollouts_are_a_function_of_seed_and_step(self):
    model = test_common.tiny_qwen3(256, seed=0)
    first, second = self._source(), self._source()
    ctx = types.SimpleNamespace(model=model, train_steps=1, iter_steps=2)
    a = first.load_next_train_batch(ctx)
    ctx.iter_steps = 3
    first.load_next_train_batch(ctx)  # Micro-batch 1 of the same rollout.
    ctx.iter_steps = 2
    b = second.load_next_train_batch(ctx)  # A fresh (resumed) source.
    self.assertEqual(jax.tree.structure(a), jax.tree.structure(b))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
      np.testing.assert_array_equal(x, y)
    # Every prompt is used once per epoch, in a seed-dependent order.
    order = np.concatenate([first.prompt_indices(s) for s in range(5)])
    self.assertCountEqual(order[:10], range(10))
    reseeded = self._source(seed=6).prompt_indices(0)
    self.assertFalse((first.prompt_indices(0) == reseeded).all())
    ctx.train_steps, ctx.iter_steps = 2, 4
    self.assertIsNone(first.load_next_train_batch(ctx))  # max_steps.

  def test_unsupported_corruption_fails(self):
    with self.assertRaisesRegex(ValueError, "complementary"):
      self._source(
          corruption=corruption_lib.SftCorruptionConfig(complementary=True)
      )


if __name__ == "__main__":
  absltest.main()
