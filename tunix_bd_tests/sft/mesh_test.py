# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The SFT loss on a 4-device CPU mesh equals the single-device loss.

Meshes `(fsdp, tp)` = (4, 1) and (2, 2) shard the batch on `fsdp` (as
Tunix's `shard_input` does, every leaf on dim 0) and the tiny Qwen3 by its
own sharding annotations. The device count is fixed when JAX starts: run
alone, this module asks for 4 CPU devices before importing JAX; under a
pytest session that started JAX earlier, `multi_device_test.py` runs it in
its subprocess.
"""

from tunix_bd_tests import multi_device

if __name__ == "__main__":  # Run alone; under pytest, multi_device_test.
  multi_device.request(4)

# pylint: disable=g-import-not-at-top,g-bad-import-order
import dataclasses
import warnings

from absl.testing import absltest
from flax import nnx
import jax
import numpy as np
import optax
from tunix.sft import peft_trainer
from tunix.sft import sharding_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd_tests import test_common

_NUM_DEVICES = 4
_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_CONFIG = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=_MASK)


def _batches(k: int):
  return test_common.digit_task_sft_batches(
      _TOKENIZER, _CONFIG, mix_seed=2, gradient_accumulation_steps=k
  )


def _model():
  # Two KV heads, so that tp = 2 really splits them.
  config = dataclasses.replace(
      test_common.tiny_qwen3_config(len(_TOKENIZER)), num_kv_heads=2
  )
  return test_common.init_qwen3(config, seed=3, scale=0.1)


def _sharded(model, mesh):
  state = nnx.state(model)
  shardings = nnx.get_named_sharding(state, mesh)
  nnx.update(model, jax.device_put(state, shardings))
  return model


@jax.jit
def _loss(graphdef, state, batch):
  return loss_lib.sft_loss(
      nnx.merge(graphdef, state),
      batch,
      config=_CONFIG,
  )


class SftMeshTest(multi_device.DeviceTestCase):
  NUM_DEVICES = _NUM_DEVICES

  def test_mesh_losses_equal_single_device(self):
    batch = _batches(1)[0]
    model = _model()
    want_loss, want_aux = _loss(*nnx.split(model), batch)
    for fsdp, tp in ((4, 1), (2, 2)):
      devices = np.asarray(jax.devices()[:_NUM_DEVICES]).reshape(fsdp, tp)
      mesh = jax.sharding.Mesh(devices, ("fsdp", "tp"))
      with mesh_lib.tunix_context(mesh):
        sharded = _sharded(_model(), mesh)
        inputs = sharding_utils.shard_input(batch, ("fsdp",))
        # The inputs and the weights really are split.
        self.assertLen(inputs.tokens.sharding.device_set, _NUM_DEVICES)
        self.assertEqual(
            inputs.global_weight.addressable_shards[0].data.shape,
            (16 // fsdp,),
        )
        kernel = sharded.layers[0].mlp.gate_proj.kernel[...]
        self.assertEqual(
            kernel.addressable_shards[0].data.shape,
            (32 // fsdp, 64 // tp),
        )
        got_loss, got_aux = _loss(*nnx.split(sharded), inputs)
      np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
      for name, value in want_aux.items():
        np.testing.assert_allclose(
            got_aux[name], value, rtol=1e-5, atol=1e-5, err_msg=name
        )

  def test_tunix_context_is_the_mesh_tunix_reads_and_is_silent(self):
    mesh = jax.sharding.Mesh(
        np.asarray(jax.devices()[:_NUM_DEVICES]).reshape(4, 1), ("fsdp", "tp")
    )
    batch = {"tokens": np.zeros((8, 4), np.int32)}
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      with mesh_lib.tunix_context(mesh) as entered:
        self.assertIs(entered, mesh)
        sharded = sharding_utils.shard_input(batch, ("fsdp",))
    self.assertLen(sharded["tokens"].sharding.device_set, _NUM_DEVICES)
    deprecated = "`with mesh:` context manager"
    self.assertEmpty([w for w in caught if deprecated in str(w.message)])
    # Why not `jax.set_mesh`: Tunix 0.1.7 reads the legacy environment,
    # which it leaves empty, so Tunix would not shard its inputs.
    with jax.set_mesh(mesh):
      unsharded = sharding_utils.shard_input(batch, ("fsdp",))
    self.assertIsInstance(unsharded["tokens"], np.ndarray)
    # The context is left on exit, even by an exception.
    with self.assertRaises(KeyError):
      with mesh_lib.tunix_context(mesh):
        raise KeyError("inside")
    with jax.set_mesh(mesh):
      self.assertIsInstance(
          sharding_utils.shard_input(batch, ("fsdp",))["tokens"], np.ndarray
      )

  def test_trainer_step_on_a_mesh_logs_the_global_batch_loss(self):
    # One update of 2 micro-batches of 8 rows each, on a (2, 2) mesh.
    batches = _batches(2)
    global_batch = _batches(1)[0]
    want, _ = _loss(*nnx.split(_model()), global_batch)
    mesh = jax.sharding.Mesh(
        np.asarray(jax.devices()[:_NUM_DEVICES]).reshape(2, 2), ("fsdp", "tp")
    )
    with mesh_lib.tunix_context(mesh):
      trainer = trainer_lib.DiffusionSftTrainer(
          _sharded(_model(), mesh),
          optax.sgd(0.1),
          peft_trainer.TrainingConfig(
              eval_every_n_steps=100, max_steps=1, gradient_accumulation_steps=2
          ),
          config=_CONFIG,
      )
      trainer.train(batches)
    self.assertEqual(trainer.train_steps, 1)
    logged = trainer.metrics_logger.get_metric_history("", "loss", "train")
    np.testing.assert_allclose(logged, [want], rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
