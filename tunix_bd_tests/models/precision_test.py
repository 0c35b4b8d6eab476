# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.precision: `model.dtype`, `remat`, chunking.

A checkpoint loads with bf16 compute on float32 parameters and the family's
own `RematConfig`; remat leaves the logits and gradients unchanged; bad
settings fail closed naming the key.
"""

import dataclasses

from absl.testing import absltest
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd import config_utils
from tunix_bd.models import export
from tunix_bd.models import precision as precision_lib
from tunix_bd_tests import test_common

_VOCAB = 64


def _inputs():
  tokens = np.arange(16, dtype=np.int32).reshape(2, 8) % _VOCAB
  positions = np.broadcast_to(np.arange(8, dtype=np.int32), (2, 8))
  mask = np.broadcast_to(np.tril(np.ones((8, 8), bool)), (2, 8, 8))
  return tokens, positions, mask


class PrecisionTest(absltest.TestCase):

  def test_load_computes_in_bf16_on_float32_weights(self):
    directory = self.create_tempdir().full_path
    source = test_common.tiny_qwen3(_VOCAB)
    export.save_checkpoint(source, directory)
    settings = precision_lib.Precision(dtype="bfloat16", remat="decoder")
    model, config = precision_lib.load(directory, settings)
    self.assertEqual(config.dtype, jnp.bfloat16)
    self.assertEqual(config.remat_config, qwen3_lib.RematConfig.DECODER)
    dtypes = {x.dtype for x in jax.tree.leaves(nnx.state(model, nnx.Param))}
    self.assertEqual(dtypes, {jnp.dtype(jnp.float32)})
    tokens, positions, mask = _inputs()
    logits, _ = model(tokens, positions, None, mask)
    want, _ = source(tokens, positions, None, mask)
    # bf16 compute: close to the float32 logits, but not equal to them.
    error = float(jnp.max(jnp.abs(logits - want)) / jnp.max(jnp.abs(want)))
    self.assertBetween(error, 1e-4, 5e-2)

  def test_decoding_weights_in_bf16_give_the_same_logits_bit_for_bit(self):
    directory = self.create_tempdir().full_path
    export.save_checkpoint(test_common.tiny_qwen3(_VOCAB), directory)
    settings = precision_lib.Precision(dtype="bfloat16")
    master, _ = precision_lib.load(directory, settings)
    decoding, _ = precision_lib.load(directory, settings, decoding_only=True)
    params = jax.tree.leaves(nnx.state(decoding, nnx.Param))
    self.assertEqual(
        {(x.ndim >= 2, x.dtype) for x in params},
        {(True, jnp.dtype(jnp.bfloat16)), (False, jnp.dtype(jnp.float32))},
    )
    tokens, positions, mask = _inputs()
    want, _ = master(tokens, positions, None, mask)
    logits, _ = decoding(tokens, positions, None, mask)
    np.testing.assert_array_equal(np.asarray(logits), np.asarray(want))

  def test_remat_changes_no_value_or_gradient(self):
    remat = "block"  # `decoder` is loaded above.
    config = test_common.tiny_family_model("qwen2", _VOCAB).config
    settings = precision_lib.Precision(remat=remat)
    remat_config = settings.model_config(config)
    self.assertEqual(
        remat_config.remat_config, qwen2_lib.RematConfig[remat.upper()]
    )
    tokens, positions, mask = _inputs()

    def loss(model):
      return jnp.sum(model(tokens, positions, None, mask)[0] ** 2)

    grads = {}
    for name, cfg in (("none", config), (remat, remat_config)):
      model = test_common.init_tunix_model(qwen2_lib.Qwen2, cfg, scale=0.05)
      value, grad = nnx.jit(nnx.value_and_grad(loss))(model)
      grads[name] = (value, nnx.to_pure_dict(grad))
    # Equal up to float reassociation in the recomputed blocks.
    for want, got in zip(
        jax.tree.leaves(grads["none"]), jax.tree.leaves(grads[remat])
    ):
      error = np.linalg.norm(got - want) / np.linalg.norm(want)
      self.assertLess(error, 1e-5)

  def test_settings_fail_closed_and_fingerprint_the_dtype(self):
    with self.assertRaisesRegex(ValueError, "^model.dtype must be one of"):
      precision_lib.Precision(dtype="float16")
    with self.assertRaisesRegex(ValueError, "^model.remat must be one of"):
      precision_lib.Precision(remat="full")
    with self.assertRaisesRegex(ValueError, "^model.logits_chunk must be"):
      precision_lib.LossPrecision(logits_chunk=1.5)
    settings = precision_lib.LossPrecision(dtype="bfloat16", logits_chunk=0)
    self.assertIsNone(settings.chunk)
    # Only the compute dtype changes what a run computes.
    resumable = {
        f.name: bool(f.metadata.get(config_utils.RESUMABLE))
        for f in dataclasses.fields(settings)
    }
    self.assertEqual(
        resumable, {"dtype": False, "remat": True, "logits_chunk": True}
    )


if __name__ == "__main__":
  absltest.main()
