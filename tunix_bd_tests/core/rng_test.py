# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.rng: JAX draws depend on their seed alone.

Each test runs under JAX's default PRNG implementations threefry2x32, rbg
and unsafe_rbg (the usual choice on TPU). `_use` also clears JAX's caches:
the implementation is not part of the compile-cache key, so a program
compiled by an earlier test would otherwise hide what a fresh process
under that implementation computes. The decodes share one geometry (the
heterogeneous shifted block-4 rows of `denoise_test`, 8 new tokens, cached)
on a one-layer model.
"""

import functools

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.core import replayer
from tunix_bd.core import rng
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.models import from_scratch
from tunix_bd.models import lora
from tunix_bd_tests import test_common

_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_MASK = 127
_QWEN3 = test_common.tiny_qwen3(vocab_size=128, num_layers=1)
_BD = bd_config.BlockDiffusionConfig(
    block_size=4, mask_token_id=_MASK, alignment=bd_config.SHIFTED
)
# First blocks with 3, 2 and 0 prompt tokens; rows 0 and 1 are padded.
_PROMPTS = [
    [5, 17, 33, 8, 91, 40, 12],
    [64, 3],
    [22, 9, 71, 15, 101, 44, 6, 30],
]
_SEEDS = [11, 12, 13]
_CONFIG = denoise.DenoiseConfig(
    max_new_tokens=8,
    max_prompt_length=10,
    stop_ids=(1,),
    rule=commit_rules.THRESHOLD,
    threshold=0.3,
    temperature=1.0,
)
_TRACE_FIELDS = ("tokens", "action_step", "action_logp")


def _impls(impls=_IMPLS):
  return parameterized.named_parameters((impl, impl) for impl in impls)


def _use(impl: str, *, fresh: bool = True) -> None:
  """Makes `impl` the default; `fresh`: programs compile anew under it."""
  jax.config.update("jax_default_prng_impl", impl)
  if fresh:
    jax.clear_caches()


def _assert_rows_equal(got, want, got_rows, want_rows):
  """Traces `got` and `want` agree exactly on the given rows."""
  for name in _TRACE_FIELDS:
    np.testing.assert_array_equal(
        getattr(got, name)[got_rows],
        getattr(want, name)[want_rows],
        err_msg=f"rows {want_rows} {name}",
    )


def _leaves(state) -> list[np.ndarray]:
  return [np.asarray(x) for x in jax.tree.leaves(state)]


class _DefaultImplTest(parameterized.TestCase):
  """Restores the process-wide default implementation after each test."""

  def setUp(self):
    super().setUp()
    self._default_impl = jax.config.jax_default_prng_impl

  def tearDown(self):
    jax.config.update("jax_default_prng_impl", self._default_impl)
    super().tearDown()


class KeyTest(_DefaultImplTest):

  @_impls()
  def test_keys_are_threefry_whatever_the_default(self, impl):
    _use(impl, fresh=False)
    seeds = jnp.asarray([7, 8], jnp.uint32)
    for got, seed in ((rng.key(7), 7), (rng.keys(seeds)[1], 8)):
      want = jax.random.key(seed, impl="threefry2x32")
      self.assertEqual(got.dtype, want.dtype)
      np.testing.assert_array_equal(
          jax.random.key_data(got), jax.random.key_data(want)
      )


class DecodeTest(_DefaultImplTest):

  def test_traces_identical_across_implementations_switched_mid_process(
      self,
  ):
    denoiser = denoise.Denoiser(_QWEN3, bd=_BD, config=_CONFIG)
    rows = list(range(len(_PROMPTS)))
    want = None
    for first in _IMPLS:
      _use(first)
      # The first call compiles under `first`; the program is kept across
      # the switches after it.
      for impl in (first, *_IMPLS):
        _use(impl, fresh=False)
        got = denoiser(_PROMPTS, seeds=_SEEDS).trace
        if want is None:
          want = got
        _assert_rows_equal(got, want, rows, rows)
      # A row alone (its own program, compiled under `first`) is its row
      # of the batch.
      _use(first, fresh=False)
      for row in rows:
        solo = denoiser([_PROMPTS[row]], seeds=[_SEEDS[row]]).trace
        _assert_rows_equal(solo, want, [0], [row])
    # Replayed under unsafe_rbg (MaxText's default on TPU), compiled anew.
    self.assertEqual(jax.config.jax_default_prng_impl, "unsafe_rbg")
    self.assertGreater(want.action_step.max(), 0)  # Several steps a block.
    self.assertLess(replayer.max_replay_error(_QWEN3, want), 1e-5)


def _init() -> list[np.ndarray]:
  """One-layer from-scratch parameters and LoRA adapters, both of seed 3."""
  config = test_common.tiny_qwen3_config(num_layers=1)
  mesh = mesh_lib.make_mesh(mesh_lib.MeshSettings(), jax.devices()[:1])
  model = from_scratch.init_model(config, seed=3, mesh=mesh)
  adapted = lora.apply_lora(
      test_common.tiny_qwen3(num_layers=1), rank=2, alpha=4.0, seed=3
  )
  return _leaves(nnx.state(model, nnx.Param)) + _leaves(
      nnx.state(adapted, nnx.LoRAParam)
  )


@functools.cache
def _threefry_init() -> list[np.ndarray]:
  _use(_IMPLS[0])
  return _init()


class InitTest(_DefaultImplTest):

  @_impls(_IMPLS[1:])
  def test_model_and_lora_init_ignore_the_default(self, impl):
    want = _threefry_init()
    _use(impl)
    got = _init()
    self.assertLen(got, len(want))
    for a, b in zip(got, want):
      np.testing.assert_array_equal(a, b)


if __name__ == "__main__":
  absltest.main()
