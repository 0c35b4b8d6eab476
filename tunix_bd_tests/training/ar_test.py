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


if __name__ == "__main__":
  absltest.main()
