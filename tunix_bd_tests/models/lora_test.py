# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.lora: qwix adapters and merging for export."""

from absl.testing import absltest
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from tunix_bd import mesh as mesh_lib
from tunix_bd.models import lora
from tunix_bd_tests import test_common


def _logits(model, tokens):
  """The causal forward, compiled once per model structure."""
  length = tokens.shape[1]
  positions = jnp.broadcast_to(jnp.arange(length), tokens.shape)
  mask = jnp.tril(jnp.ones((1, length, length), bool))
  forward = test_common.JittedModel(model)
  return np.asarray(forward(tokens, positions, None, mask)[0])


class LoraTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.config = test_common.tiny_qwen3_config(vocab_size=64, num_layers=1)
    self.base = test_common.tiny_qwen3(vocab_size=64, num_layers=1)
    self.tokens = jnp.asarray([[5, 9, 12, 7, 3, 30]])

  def _trained_lora(self):
    model = lora.apply_lora(self.base, rank=4, alpha=8.0)
    # B starts at zero; random adapters make the merge non-trivial.
    state = nnx.state(model, nnx.LoRAParam)
    keys = iter(jax.random.split(jax.random.key(1), 64))
    nnx.update(
        model,
        jax.tree.map(
            lambda x: 0.3 * jax.random.normal(next(keys), x.shape), state
        ),
    )
    return model

  def test_adapters_cover_every_projection(self):
    model = lora.apply_lora(self.base, rank=4, alpha=8.0)
    names = {
        path[-2]
        for path, value in nnx.iter_graph(model)
        if isinstance(value, nnx.LoRAParam)
    }
    self.assertEqual(
        names,
        {
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        },
    )
    # Fresh adapters (B = 0) leave the function unchanged.
    np.testing.assert_allclose(
        _logits(model, self.tokens),
        _logits(self.base, self.tokens),
        atol=1e-6,
    )

  def test_merged_model_equals_the_lora_model(self):
    model = self._trained_lora()
    merged = lora.merge_lora(model, self.config, alpha=8.0)
    self.assertEmpty(nnx.state(merged, nnx.LoRAParam))
    np.testing.assert_allclose(
        _logits(merged, self.tokens), _logits(model, self.tokens), atol=1e-5
    )
    self.assertGreater(
        np.abs(
            _logits(merged, self.tokens) - _logits(self.base, self.tokens)
        ).max(),
        1e-3,
    )

  def test_only_lora_params_train(self):
    model = self._trained_lora()
    base_filter = nnx.All(nnx.Param, nnx.Not(nnx.LoRAParam))
    snapshot = lambda f: [
        np.asarray(x) for x in jax.tree.leaves(nnx.state(model, f))
    ]
    base_before, lora_before = snapshot(base_filter), snapshot(nnx.LoRAParam)
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.LoRAParam)
    loss_fn = lambda m: jnp.mean(_logits_jnp(m, self.tokens) ** 2)
    grads = nnx.jit(nnx.grad(loss_fn, argnums=nnx.DiffState(0, nnx.LoRAParam)))(
        model
    )
    optimizer.update(model, grads)
    for before, after in zip(base_before, snapshot(base_filter)):
      np.testing.assert_array_equal(before, after)
    self.assertTrue(
        any(
            np.any(b != a) for b, a in zip(lora_before, snapshot(nnx.LoRAParam))
        )
    )

  def test_the_lora_section_applies_and_merges_its_adapters(self):
    mesh = mesh_lib.make_mesh(mesh_lib.MeshSettings(), jax.devices()[:1])
    full = lora.LoraSettings()  # Rank 0: every weight trains, as it is.
    self.assertIs(lora.apply(full, self.base, seed=0, mesh=mesh), self.base)
    self.assertIs(lora.merge(full, self.base, self.config), self.base)
    settings = lora.LoraSettings(rank=4, alpha=8.0)
    model = lora.apply(settings, self.base, seed=0, mesh=mesh)
    self.assertLen(jax.tree.leaves(nnx.state(model, nnx.LoRAParam)), 14)
    # B starts at zero: the merged weights are the base's.
    merged = lora.merge(settings, model, self.config)
    for want, got in zip(
        jax.tree.leaves(nnx.state(self.base, nnx.Param)),
        jax.tree.leaves(nnx.state(merged, nnx.Param)),
    ):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

  def test_bad_settings_fail_closed(self):
    with self.assertRaisesRegex(ValueError, "lora.rank"):
      lora.LoraSettings(rank=-1)
    with self.assertRaisesRegex(ValueError, "lora.alpha"):
      lora.LoraSettings(rank=4, alpha=0.0)
    with self.assertRaisesRegex(ValueError, "lora.module_path"):
      lora.apply_lora(self.base, rank=4, alpha=8.0, module_path=".*nothing")


def _logits_jnp(model, tokens):
  length = tokens.shape[1]
  positions = jnp.broadcast_to(jnp.arange(length), tokens.shape)
  mask = jnp.tril(jnp.ones((1, length, length), bool))
  return model(tokens, positions, None, mask)[0]


if __name__ == "__main__":
  absltest.main()
