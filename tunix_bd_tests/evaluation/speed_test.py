# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of tunix_bd.evaluation.speed: interleaving, padding, best repeat."""

from unittest import mock

from absl.testing import absltest
import numpy as np

from tunix_bd.evaluation import speed


def _decoder(name, calls, seconds_per_call):
  """Records its calls and advances the (patched) clock by a fixed cost."""

  def decode(batch):
    calls.append((name, list(batch)))
    _CLOCK[0] += seconds_per_call.pop(0) if seconds_per_call else 0.0
    return speed.BatchOutput(
        texts=[f"{name}:{p}" for p in batch],
        num_tokens=np.asarray([len(str(p)) for p in batch]),
        num_forwards=np.ones(len(batch), int),
    )

  return decode


_CLOCK = [0.0]


class MeasureTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    _CLOCK[0] = 0.0
    patcher = mock.patch.object(
        speed.time, "perf_counter", side_effect=lambda: _CLOCK[0]
    )
    patcher.start()
    self.addCleanup(patcher.stop)

  def test_methods_alternate_batch_by_batch_and_pad_the_last(self):
    calls = []
    decoders = {
        "a": _decoder("a", calls, []),
        "b": _decoder("b", calls, []),
    }
    inputs = {"a": [1, 2, 3], "b": [10, 20, 30]}
    timings = speed.measure(decoders, inputs, batch_size=2, repeats=2)
    want = [("a", [1, 2]), ("b", [10, 20])]  # Compilation, untimed.
    for _ in range(2):
      want += [("a", [1, 2]), ("b", [10, 20]), ("a", [3, 3]), ("b", [30, 30])]
    self.assertEqual(calls, want)
    # The padding copy's output is dropped.
    self.assertEqual(timings["b"].texts, ["b:10", "b:20", "b:30"])
    np.testing.assert_array_equal(timings["b"].num_tokens, [2, 2, 2])

  def test_time_sums_each_batchs_fastest_repeat(self):
    calls = []
    # Compile 9 s (ignored); repeat 1: 1 + 2 s; repeat 2: 0.5 + 3 s.
    decoders = {"a": _decoder("a", calls, [9.0, 1.0, 2.0, 0.5, 3.0])}
    timing = speed.measure(
        decoders, {"a": [1, 2, 3, 4]}, batch_size=2, repeats=2
    )["a"]
    self.assertEqual(timing.seconds, 0.5 + 2.0)
    self.assertEqual(timing.tokens_per_s, 4 / 2.5)
    self.assertEqual(timing.seconds_per_row, 2.5 / 4)
    # The spread over repeats: each batch's slowest.
    self.assertEqual(timing.slowest_seconds, 1.0 + 3.0)
    # The compiling first batch, reported apart (progress lines).
    self.assertEqual(timing.warmup_seconds, 9.0)

  def test_token_ids_pass_through_without_the_padding_copy(self):
    def decode(batch):
      return speed.BatchOutput(
          texts=[str(p) for p in batch],
          num_tokens=np.ones(len(batch), int),
          num_forwards=np.ones(len(batch), int),
          tokens=[[p, p + 1] for p in batch],
      )

    timings = speed.measure(
        {"a": decode, "b": _decoder("b", [], [])},
        {"a": [1, 2, 3], "b": [1, 2, 3]},
        batch_size=2,
    )
    self.assertEqual(timings["a"].tokens, [[1, 2], [2, 3], [3, 4]])
    self.assertIsNone(timings["b"].tokens)

  def test_mismatched_inputs_fail(self):
    decoders = {"a": _decoder("a", [], []), "b": _decoder("b", [], [])}
    with self.assertRaisesRegex(ValueError, "same, non-zero number"):
      speed.measure(decoders, {"a": [1], "b": [1, 2]}, batch_size=1)


if __name__ == "__main__":
  absltest.main()
