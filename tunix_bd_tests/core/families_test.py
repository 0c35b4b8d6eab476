# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion contract on every supported Tunix family.

Tiny random Qwen2 and Llama 3 (and Qwen3, the reference family): block size
1 is the causal model bit for bit, replay reproduces cached decoding, SFT
lowers the loss; other models fail closed. The RoPE base each family really
applies is probed, and checked against Hugging Face Llama checkpoints
(`testdata/hf`); every entry point refuses a `rope_theta` that Tunix would
not apply. Those Llama checkpoints, of any theta, load through
`hf_checkpoint` as Tunix's Qwen2 and match torch through the contract.
"""

from __future__ import annotations

import dataclasses
import json
import os
import types

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tunix.generate import utils as generate_utils
from tunix.models.llama3 import model as llama3_lib
from tunix.models.llama3 import params as llama3_params
from tunix_bd import compat
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import replayer
from tunix_bd.generate import denoise
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import micro_batches
from tunix_bd_tests import test_common

_VOCAB = 64
_MASK = 3
_PAD = 0
_FAMILIES = ("qwen2", "llama3")
_HF = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "hf")
_HF_MASK = 399  # The last id of the HF fixtures' vocabulary; not in tokens.
_REFUSED = r"rope_theta=%s is not supported: Tunix's %s attention always"


def _bd(block_size=4, alignment=bd_config.SHIFTED):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )


def _ar_bd(mask_token_id):
  """Block size 1 on one canvas: the model's own causal forward."""
  return bd_config.BlockDiffusionConfig(
      block_size=1,
      mask_token_id=mask_token_id,
      alignment=bd_config.SAME_POSITION,
      layout=bd_config.SINGLE_CANVAS,
  )


def _prompts(rng, lengths):
  return [rng.integers(_MASK + 1, _VOCAB, n).tolist() for n in lengths]


def _causal_logits(model, tokens):
  """The model's own causal forward, `[batch, length, vocab]` float32."""
  batch, length = tokens.shape
  positions = np.broadcast_to(np.arange(length), (batch, length))
  causal = generate_utils.make_causal_attn_mask(
      np.ones((batch, length), bool), length
  )
  logits, _ = model(tokens, positions.astype(np.int32), None, causal)
  return np.asarray(logits, np.float32)


def _hf_llama_config(name):
  """The Tunix Llama 3 config of `testdata/hf/<name>/config.json`."""
  with open(os.path.join(_HF, name, "config.json")) as f:
    hf = json.load(f)
  return llama3_lib.ModelConfig(
      num_layers=hf["num_hidden_layers"],
      vocab_size=hf["vocab_size"],
      embed_dim=hf["hidden_size"],
      hidden_dim=hf["intermediate_size"],
      num_heads=hf["num_attention_heads"],
      head_dim=hf["head_dim"],
      num_kv_heads=hf["num_key_value_heads"],
      rope_theta=hf["rope_parameters"]["rope_theta"],
      norm_eps=hf["rms_norm_eps"],
      weight_tying=hf["tie_word_embeddings"],
  )


def _hf_llama(name):
  """A `testdata/hf` checkpoint through Tunix's own Llama 3 loader.

  Returns:
    `(model, tokens [rows, 24] int32, torch's logits [rows, 24, 400])`.
  """
  directory = os.path.join(_HF, name)
  model = llama3_params.create_model_from_safe_tensors(
      directory, _hf_llama_config(name), dtype=jnp.float32
  )
  oracle = np.load(os.path.join(directory, "oracle.npz"))
  return model, oracle["tokens"].astype(np.int32), oracle["logits"]


def _assert_contract_matches_torch(model, tokens, want, atol):
  """The contract at block size 1 (the causal model) against torch."""
  positions = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
  got = diffusion_lm.diffusion_logits_fn(
      model, tokens, positions.astype(np.int32), None, config=_ar_bd(_HF_MASK)
  )
  keep = np.arange(want.shape[-1]) != _HF_MASK
  np.testing.assert_allclose(
      np.asarray(got)[..., keep], want[..., keep], rtol=0, atol=atol
  )


def _presets(config_type):
  """Every Tunix preset (public no-argument classmethod) of a config type."""
  for name, attr in vars(config_type).items():
    if isinstance(attr, classmethod) and not name.startswith("_"):
      preset = getattr(config_type, name)()
      if isinstance(preset, config_type):
        yield name, preset


class _CountingModel:
  """A real Tunix model that counts its forward calls."""

  def __init__(self, model):
    self.model, self.config, self.calls = model, model.config, 0

  def __call__(self, *args):
    self.calls += 1
    return self.model(*args)


class FamiliesTest(parameterized.TestCase):

  @parameterized.parameters(*_FAMILIES)
  def test_block_size_one_is_the_causal_model_bit_for_bit(self, family):
    model = test_common.tiny_family_model(family, _VOCAB)
    self.assertEqual(families.family(model.config), family)
    rng = np.random.default_rng(0)
    tokens = rng.integers(_MASK + 1, _VOCAB, (2, 11)).astype(np.int32)
    positions = np.broadcast_to(np.arange(11), (2, 11)).astype(np.int32)
    config = dataclasses.replace(
        _bd(1, bd_config.SAME_POSITION), layout=bd_config.SINGLE_CANVAS
    )
    got = diffusion_lm.diffusion_logits_fn(
        model, tokens, positions, None, config=config
    )
    causal = generate_utils.make_causal_attn_mask(np.ones((2, 11), bool), 11)
    want, _ = model(tokens, positions, None, causal)
    keep = np.arange(_VOCAB) != _MASK
    np.testing.assert_array_equal(
        np.asarray(got)[..., keep], np.asarray(want, np.float32)[..., keep]
    )

  @parameterized.parameters(*_FAMILIES)
  def test_cached_decoding_replays_at_parity(self, family):
    # The family's KV cache against replay's forward, action by action;
    # that cached decoding equals cache-free decoding in every geometry is
    # the decode loop's (decode_loop_test), whatever the model.
    model = test_common.tiny_family_model(family, _VOCAB)
    config = denoise.DenoiseConfig(
        max_new_tokens=10,
        max_prompt_length=8,
        threshold=0.3,
        temperature=0.8,
        stop_ids=(7,),
        pad_id=_PAD,
        use_cache=True,
    )
    prompts = _prompts(np.random.default_rng(1), (5, 2, 8))
    cached = denoise.Denoiser(model, bd=_bd(), config=config)(
        prompts, seeds=[0, 1, 2]
    )
    self.assertGreater(cached.trace.action_step.max(), 0)
    self.assertLessEqual(replayer.max_replay_error(model, cached.trace), 1e-5)

  @parameterized.parameters(*_FAMILIES)
  def test_sft_loss_decreases(self, family):
    model = test_common.tiny_family_model(family, _VOCAB)
    bd = _bd()
    rng = np.random.default_rng(2)
    tokens = rng.integers(_MASK + 1, 12, (4, 16)).astype(np.int32)
    tokens[:, 8:] = tokens[:, :8]  # A copy task the model can learn.
    positions = np.broadcast_to(np.arange(16), tokens.shape).astype(np.int32)
    corrupted = (rng.random(tokens.shape) < 0.5) & (positions >= 8)
    batch = micro_batches.SftBatch(
        tokens=tokens,
        noisy_tokens=np.where(corrupted, _MASK, tokens),
        positions=positions,
        segment_ids=np.ones_like(tokens),
        completion_mask=positions >= 8,
        corruption_mask=corrupted,
        loss_weights=corrupted.astype(np.float32),
        noise_level=np.full(tokens.shape, 0.5, np.float32),
        global_weight=np.full(4, corrupted.sum(), np.float32),
        accumulation_steps=np.ones(4, np.int32),
    )
    loss_fn = loss_lib.sft_loss_fn(bd)
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer):
      (loss, _), grads = nnx.value_and_grad(
          lambda m: loss_fn(m, batch), has_aux=True
      )(model)
      optimizer.update(model, grads)
      return loss

    losses = [float(train_step(model, optimizer)) for _ in range(15)]
    self.assertLess(losses[-1], 0.8 * losses[0])

  @parameterized.parameters(*families.FAMILIES)
  def test_rope_theta_table_is_what_tunix_applies(self, family):
    # A family that ignores the config's theta computes the same logits
    # whatever it says; one that follows it does not. The base applied is
    # pinned against outside references: torch for Llama 3 (below), a NumPy
    # Qwen3 at 1e6 for Qwen3 (hf_checkpoint_test).
    model = test_common.tiny_family_model(family, _VOCAB)
    tokens = np.random.default_rng(3).integers(_MASK + 1, _VOCAB, (2, 16))

    def logits(theta):
      config = dataclasses.replace(model.config, rope_theta=theta)
      other = test_common.init_tunix_model(type(model), config)
      return _causal_logits(other, tokens.astype(np.int32))

    applied = compat.ROPE_THETA_APPLIED[family]
    reference = logits(1_000_000)
    for theta in (10_000, 500_000, 5_000_000):
      if applied is None:
        self.assertGreater(np.abs(logits(theta) - reference).max(), 1e-3)
      else:
        np.testing.assert_array_equal(logits(theta), reference)

  def test_hf_llama_at_theta_1e6_matches_torch_through_the_contract(self):
    model, tokens, want = _hf_llama("llama_theta1e6")
    self.assertEqual(families.family(model.config), "llama3")
    _assert_contract_matches_torch(model, tokens, want, atol=1e-5)

  @parameterized.parameters(
      "llama_theta1e6", "llama_untied", "llama_tied_theta5e5"
  )
  def test_hf_llama_of_any_theta_loads_exactly_as_qwen2(self, name):
    # Llama 3's theta 5e5 (tied: Llama 3.2's layout) and 1e6, through the
    # loader: Tunix's Qwen2 with zero q/k/v biases rotates with the
    # config's theta. Block size 1 is the causal model, so torch's logits.
    directory = os.path.join(_HF, name)
    model, config = hf_checkpoint.load(directory)
    self.assertEqual(families.family(config), "qwen2")
    with open(os.path.join(directory, "config.json")) as f:
      theta = json.load(f)["rope_parameters"]["rope_theta"]
    self.assertEqual(config.rope_theta, theta)
    oracle = np.load(os.path.join(directory, "oracle.npz"))
    tokens, want = oracle["tokens"].astype(np.int32), oracle["logits"]
    _assert_contract_matches_torch(model, tokens, want, atol=1e-4)

  def test_tunix_rotates_an_hf_llama3_with_1e6_not_its_theta(self):
    # What the refusal prevents: Tunix alone runs Llama 3's theta 5e5 as
    # 1e6, right only at position 0, where RoPE is the identity.
    model, tokens, want = _hf_llama("llama_untied")
    self.assertEqual(model.config.rope_theta, 500_000)
    got = _causal_logits(model, tokens)
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=0, atol=1e-5)
    self.assertGreater(np.abs(got[:, 1:] - want[:, 1:]).max(), 0.1)
    model.config = dataclasses.replace(model.config, rope_theta=1_000_000)
    np.testing.assert_array_equal(_causal_logits(model, tokens), got)

  @parameterized.parameters("llama_untied", "llama_tied_theta5e5")
  def test_hf_llama3_theta_is_refused(self, name):
    config = _hf_llama_config(name)
    message = _REFUSED % ("500000.0", "Llama 3")
    with self.assertRaisesRegex(ValueError, message):
      families.family(config)
    # It points at the exact route (test_hf_llama_of_any_theta_...).
    with self.assertRaisesRegex(ValueError, "loads exactly at its own theta"):
      families.family(config)
    with self.assertRaisesRegex(ValueError, message):
      block_cache.init_block_cache(types.SimpleNamespace(config=config), 1, 4)

  def test_the_contract_refuses_before_any_compute(self):
    model = _CountingModel(_hf_llama("llama_untied")[0])
    tokens = np.full((1, 4), 5, np.int32)
    positions = np.arange(4, dtype=np.int32)[None]
    bd = _ar_bd(_HF_MASK)
    with self.assertRaisesRegex(ValueError, _REFUSED % ("500000.0", "Llama 3")):
      diffusion_lm.diffusion_logits_fn(
          model, tokens, positions, None, config=bd
      )
    self.assertEqual(model.calls, 0)

  @parameterized.parameters(*families.FAMILIES)
  def test_presets_run_only_at_the_theta_tunix_applies(self, family):
    applied = compat.ROPE_THETA_APPLIED[family]
    accepted, refused = set(), set()
    for name, preset in _presets(families.FAMILIES[family]):
      if applied is None or preset.rope_theta == applied:
        self.assertEqual(families.family(preset), family)
        accepted.add(name)
      else:
        with self.assertRaisesRegex(ValueError, f"={preset.rope_theta}"):
          families.family(preset)
        refused.add(name)
    expected = {
        "qwen3": ({"qwen3_0p6b", "qwen3_8b"}, {"qwen3_4b_instruct_2507"}),
        "qwen2": ({"qwen2p5_0p5b"}, set()),
        "llama3": (set(), {"llama3p2_1b", "llama3p1_8b", "llama3_70b"}),
    }[family]
    self.assertContainsSubset(expected[0], accepted)
    self.assertContainsSubset(expected[1], refused)
    if family == "llama3":
      self.assertEmpty(accepted)  # Every Llama 3 preset says 5e5.

  def test_from_scratch_refuses_a_theta_qwen3_does_not_apply(self):
    config = dataclasses.replace(
        test_common.tiny_qwen3_config(_VOCAB), rope_theta=5_000_000
    )
    mesh = mesh_lib.make_mesh(mesh_lib.MeshSettings(), jax.devices()[:1])
    with self.assertRaisesRegex(ValueError, _REFUSED % ("5000000", "Qwen3")):
      from_scratch.init_model(config, seed=0, mesh=mesh)

  def test_other_models_fail_closed_naming_the_families(self):
    other = types.SimpleNamespace(
        config=types.SimpleNamespace(vocab_size=_VOCAB),
        init_cache=lambda *a: None,
    )
    tokens = np.zeros((1, 4), np.int32)
    with self.assertRaisesRegex(ValueError, r"\['llama3', 'qwen2', 'qwen3'\]"):
      diffusion_lm.diffusion_logits_fn(
          other, tokens, tokens, None, config=_bd()
      )
    with self.assertRaisesRegex(ValueError, r"supported"):
      block_cache.init_block_cache(other, 1, 4)


if __name__ == "__main__":
  absltest.main()
