# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.training.ar`: inputs of Tunix's stock AR loss."""

from absl.testing import absltest
import jax.numpy as jnp
import numpy as np

from tunix_bd.training import ar


class ArModelInputsTest(absltest.TestCase):

  def test_model_inputs_are_causal_and_keep_pads_out(self):
    batch = {
        "tokens": jnp.array([[5, 6, 7, 0]]),
        "completion_mask": jnp.array([[False, True, True, False]]),
        "valid_mask": jnp.array([[True, True, True, False]]),
    }
    inputs = ar.ar_model_inputs(batch)
    expected = np.tril(np.ones((4, 4), bool))
    expected[:, 3] = False
    expected[3, :] = False
    np.testing.assert_array_equal(inputs["attention_mask"][0], expected)
    np.testing.assert_array_equal(inputs["positions"][0], [0, 1, 2, 3])
    np.testing.assert_array_equal(
        inputs["input_mask"], batch["completion_mask"]
    )

  def test_packed_documents_do_not_see_each_other(self):
    batch = {
        "tokens": jnp.array([[5, 6, 7, 8, 9, 0]]),
        "completion_mask": jnp.array([[0, 1, 1, 0, 1, 0]], bool),
        "valid_mask": jnp.array([[1, 1, 1, 1, 1, 0]], bool),
        "segment_ids": jnp.array([[1, 1, 1, 2, 2, 0]]),
        "positions": jnp.array([[0, 1, 2, 0, 1, 5]]),
    }
    inputs = ar.ar_model_inputs(batch)
    expected = np.zeros((6, 6), bool)
    expected[:3, :3] = np.tril(np.ones((3, 3), bool))
    expected[3:5, 3:5] = np.tril(np.ones((2, 2), bool))
    np.testing.assert_array_equal(inputs["attention_mask"][0], expected)
    np.testing.assert_array_equal(inputs["positions"], batch["positions"])


if __name__ == "__main__":
  absltest.main()
