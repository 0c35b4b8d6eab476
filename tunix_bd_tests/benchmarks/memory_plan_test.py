# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The memory planner against Tunix's own models, and the docs against it."""

import dataclasses
import pathlib
import re

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import from_scratch
from tunix_bd.training import options
from benchmarks import memory_plan

_MEMORY_DOC = (
    pathlib.Path(__file__).resolve().parents[2] / "docs" / "real_models.md"
)
_TUNIX_PRESETS = {
    "Qwen3-0.6B": qwen3_lib.ModelConfig.qwen3_0p6b,
    "Qwen3-8B": qwen3_lib.ModelConfig.qwen3_8b,
    "Qwen3-32B": qwen3_lib.ModelConfig.qwen3_32b,
}


def _shape(config: qwen3_lib.ModelConfig) -> memory_plan.ModelShape:
  return memory_plan.ModelShape(
      num_layers=config.num_layers,
      embed_dim=config.embed_dim,
      hidden_dim=config.hidden_dim,
      num_heads=config.num_heads,
      num_kv_heads=config.num_kv_heads,
      head_dim=config.head_dim,
      vocab_size=config.vocab_size,
      tied_embedding=config.use_tied_embedding,
  )


def _num_params(model_or_abstract) -> int:
  state = nnx.state(model_or_abstract, nnx.Param)
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state))


# XLA's peak (MiB) of bfloat16 SFT steps at Qwen3-0.6B's widths, by layers,
# remat, batch, length and variant, compiled on a TPU v5e (2026-12-05,
# `tools/tpu/sft_memory.py`; the first 8 calibrate `backend="tpu"`, the rest
# were measured after it).
_TPU_V5E_PEAK_MIB = (
    (2, "none", 16, 512, "ar", 9583.3),
    (2, "none", 16, 512, "bd_single_canvas", 5132.0),
    (2, "none", 16, 512, "bd_clean_context", 6050.7),
    (2, "none", 4, 1024, "ar", 6885.5),
    (2, "none", 4, 1024, "bd_single_canvas", 4657.5),
    (4, "none", 16, 512, "ar", 10983.6),
    (4, "none", 16, 512, "bd_single_canvas", 6655.2),
    (4, "none", 16, 512, "bd_clean_context", 8903.6),
    (4, "block", 16, 512, "ar", 10066.0),
    (4, "block", 16, 512, "bd_single_canvas", 5412.5),
    (4, "block", 16, 512, "bd_clean_context", 5859.8),
    (2, "block", 4, 1024, "ar", 6709.6),
    (2, "block", 4, 1024, "bd_single_canvas", 4356.9),
    (2, "block", 4, 1024, "bd_clean_context", 4546.5),
    (6, "none", 8, 512, "ar", 8936.7),
    (6, "none", 8, 512, "bd_single_canvas", 6780.1),
    (6, "none", 8, 512, "bd_clean_context", 8653.0),
    (4, "decoder", 8, 1024, "ar", 9900.1),
    (4, "decoder", 8, 1024, "bd_single_canvas", 5284.9),
    (4, "decoder", 8, 1024, "bd_clean_context", 7509.7),
)

# The same with `model.attention=splash` (4 layers, no remat; 2026-12-06,
# `tools/tpu/sft_long.py` and `bench_sft`).
_TPU_V5E_SPLASH_PEAK_MIB = (
    (4, "none", 1, 8192, "bd_single_canvas", 6155.2),
    (4, "none", 1, 8192, "bd_clean_context", 7272.9),
    (4, "none", 16, 512, "bd_single_canvas", 6172.7),
    (4, "none", 16, 512, "bd_clean_context", 7271.7),
)


class MemoryPlanTest(parameterized.TestCase):

  @parameterized.named_parameters((name, name) for name in _TUNIX_PRESETS)
  def test_published_shapes_are_tunix_presets_and_counts_match(self, name):
    config = _TUNIX_PRESETS[name]()
    self.assertEqual(memory_plan.QWEN3[name], _shape(config))
    # Two of the layers (the count is linear in them), abstractly.
    config = dataclasses.replace(config, num_layers=2)
    abstract = nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0)))
    self.assertEqual(_shape(config).num_params(), _num_params(abstract))

  @parameterized.parameters(True, False)
  def test_embedded_model_count_equals_the_real_model(self, tied):
    section = config_utils.to_section(from_scratch.ScratchModelSettings)
    section.tie_embeddings = tied
    settings = config_utils.from_section(
        from_scratch.ScratchModelSettings, section, "model"
    )
    vocab = len(tokenizer_lib.build_char_tokenizer())
    config = from_scratch.qwen3_config(settings, vocab)
    mesh = mesh_lib.make_mesh(mesh_lib.MeshSettings(), jax.devices()[:1])
    # The recipes' own build, abstractly (its shapes, nothing compiled).
    model = nnx.eval_shape(
        lambda: from_scratch.init_model(config, seed=0, mesh=mesh)
    )
    self.assertEqual(_shape(config).num_params(), _num_params(model))

  @parameterized.parameters("adamw", "adafactor")
  def test_optimizer_state_equals_optax_state_bytes(self, name):
    # Qwen3-0.6B's layer widths (each factored dimension >= 128), abstractly.
    config = dataclasses.replace(
        _TUNIX_PRESETS["Qwen3-0.6B"](), num_layers=2, vocab_size=512
    )
    abstract = nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0)))
    rule = options.optimizer(options.Train(optimizer=name))
    state = jax.eval_shape(rule.init, nnx.state(abstract, nnx.Param))
    # The weights' shaped state; scalars (step counts, hyperparameters) and
    # Adafactor's placeholders (its `v` of a factored weight) aside.
    state_bytes = sum(
        leaf.size * leaf.dtype.itemsize
        for leaf in jax.tree.leaves(state)
        if leaf.size > 1
    )
    self.assertEqual(
        memory_plan.optimizer_state_bytes(_shape(config), name), state_bytes
    )

  def test_kv_cache_equals_tunix_cache_bytes(self):
    # The planner's bfloat16 cache; Tunix's cache takes the config's dtype.
    config = dataclasses.replace(
        _TUNIX_PRESETS["Qwen3-0.6B"](), dtype=jnp.bfloat16
    )
    work = memory_plan.Workload(
        prompt_length=5, rollout_length=11, rollout_batch=3
    )
    cache = jax.eval_shape(
        lambda: qwen3_lib.Qwen3.init_cache(
            nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0))),
            work.rollout_batch,
            work.prompt_length + work.rollout_length,
            jnp.bfloat16,
        )
    )
    kv_bytes = sum(
        np.prod(layer[part].shape) * layer[part].dtype.itemsize
        for layer in cache.values()
        for part in ("k", "v")
    )
    self.assertEqual(memory_plan.kv_cache_bytes(_shape(config), work), kv_bytes)

  def test_shared_roles_add_to_the_actor_and_split_over_devices(self):
    shape = memory_plan.QWEN3["Qwen3-8B"]
    params = shape.num_params()
    shared = memory_plan.plan(shape, memory_plan.Split(actor=8))
    self.assertEqual(list(shared), ["actor"])
    self.assertNotIn("rollout copy", shared["actor"].parts)  # The actor's.
    self.assertEqual(shared["actor"].parts["optimizer"], 2 * params * 4 / 8)
    split = memory_plan.plan(
        shape, memory_plan.Split(actor=4, reference=2, rollout=2)
    )
    self.assertEqual(list(split), ["actor", "reference", "rollout"])
    self.assertEqual(split["reference"].total, params * 2 / 2)
    self.assertNotIn("KV cache", split["actor"].parts)
    total = sum(g.total * g.devices for g in split.values())
    self.assertAlmostEqual(
        total, sum(shared["actor"].parts.values()) * 8 + params * 2
    )
    self.assertTrue(shared["actor"].fits(shared["actor"].total / 0.9))
    self.assertFalse(shared["actor"].fits(shared["actor"].total / 0.9 - 1))
    with self.assertRaisesRegex(ValueError, "actor >= 1"):
      memory_plan.Split(actor=0)

  def test_sft_step_plan_counts_what_each_setting_keeps(self):
    shape = memory_plan.QWEN3["Qwen3-0.6B"]
    step = memory_plan.SftStep(batch_size=1, length=512)
    plan = lambda **kw: memory_plan.sft_step_plan(
        shape, dataclasses.replace(step, **kw)
    ).parts
    params = shape.num_params()
    self.assertEqual(plan()["optimizer"], 2 * params * 4)
    # Chunked: three [512, 8192] float32 copies; dense: two over both copies.
    self.assertEqual(plan()["logits"], 3 * 512 * 8192 * 4)
    self.assertEqual(plan(logits_chunk=0)["logits"], 2 * 1024 * 151936 * 4)
    self.assertEqual(plan(autoregressive=True)["logits"], 4 * 512 * 151936 * 4)
    # The clean copy doubles the tokens (and each query's keys).
    self.assertGreater(
        plan()["activations"], 2 * plan(clean_context=False)["activations"]
    )
    none, block, decoder = (
        plan(remat=r)["activations"] for r in ("none", "block", "decoder")
    )
    self.assertGreater(none, 10 * block)
    self.assertGreater(block, decoder)
    self.assertGreater(none, plan(dtype_bytes=2)["activations"])
    # The update's temporaries: parameter-sized buffers of every layer.
    layer = (
        shape.embed_dim * shape.head_dim * 2 * (16 + 8)
        + 3 * shape.embed_dim * shape.hidden_dim
        + 2 * shape.embed_dim
        + 2 * shape.head_dim
    )
    self.assertEqual(plan()["update temporaries"], 4 * 28 * layer * 4)
    self.assertEqual(plan(update_buffers=0)["update temporaries"], 0)

  def test_tpu_plan_is_within_15_percent_of_xla_on_a_tpu(self):
    points = [(p, False) for p in _TPU_V5E_PEAK_MIB]
    points += [(p, True) for p in _TPU_V5E_SPLASH_PEAK_MIB]
    for (layers, remat, batch_size, length, variant, peak), splash in points:
      shape = dataclasses.replace(
          memory_plan.QWEN3["Qwen3-0.6B"], num_layers=layers
      )
      step = memory_plan.SftStep(
          batch_size=batch_size,
          length=length,
          clean_context=variant == "bd_clean_context",
          autoregressive=variant == "ar",
          dtype_bytes=2,
          remat=remat,
          logits_chunk=0 if variant == "ar" else 8192,
          backend="tpu",
          splash=splash,
      )
      planned = memory_plan.sft_step_plan(shape, step).total / 2**20
      with self.subTest(layers=layers, variant=variant, splash=splash):
        self.assertLess(abs(planned / peak - 1), 0.15)
    with self.assertRaisesRegex(ValueError, "backend must be"):
      memory_plan.SftStep(batch_size=1, length=8, backend="gpu")

  def test_published_table_is_the_planners(self):
    text = _MEMORY_DOC.read_text(encoding="utf-8")
    match = re.search(
        r"<!-- memory_plan:start -->\n(.*?)\n<!-- memory_plan:end -->",
        text,
        re.DOTALL,
    )
    self.assertIsNotNone(match, "docs/real_models.md has no memory_plan table.")
    want = (
        f"{memory_plan.published_table()}\n\n{memory_plan.workload_caption()}"
    )
    self.assertEqual(match.group(1), want)


if __name__ == "__main__":
  absltest.main()
