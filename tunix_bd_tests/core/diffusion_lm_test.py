# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.core.diffusion_lm on a tiny real Tunix Qwen3."""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.generate import utils as generate_utils
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import layer_scan
from tunix_bd.core import lm_head
from tunix_bd.core import scoring
from tunix_bd.models import lora
from tunix_bd_tests import test_common

_VOCAB = 96
_MASK = 7
_ALIGNMENTS = (bd_config.SAME_POSITION, bd_config.SHIFTED)
# One canvas length for every test: each shape compiles the model once.
_LENGTH = 12


def _tiny_qwen3() -> qwen3_lib.Qwen3:
  return test_common.tiny_qwen3(vocab_size=_VOCAB)


@jax.jit
def _forward(graphdef, state, tokens, positions, cache, mask):
  return nnx.merge(graphdef, state)(tokens, positions, cache, mask)


class _JittedQwen3:
  """A Qwen3 behind one compiled forward per input shape.

  It is called exactly as a Tunix model, so the code under test runs eagerly
  around a real Qwen3 forward that compiles once per shape, not once per
  test configuration.
  """

  def __init__(self, model: qwen3_lib.Qwen3):
    self.model = model
    self.config = model.config
    self._split = nnx.split(model)

  def __call__(self, tokens, positions, cache, mask):
    return _forward(*self._split, tokens, positions, cache, mask)

  def init_cache(self, batch_size, cache_size, dtype):
    return self.model.init_cache(batch_size, cache_size, dtype)


_QWEN3 = _tiny_qwen3()
_MODEL = _JittedQwen3(_QWEN3)
# Same weights, flash attention on (never run: it must be rejected).
_FLASH_MODEL = _JittedQwen3(_QWEN3)
_FLASH_MODEL.config = dataclasses.replace(
    _QWEN3.config, use_flash_attention=True
)


def _logits(model, tokens, positions, segments, clean, config):
  return diffusion_lm.diffusion_logits_fn(
      model, tokens, positions, segments, config=config, clean_tokens=clean
  )


def _config(block_size, alignment, layout=bd_config.SINGLE_CANVAS):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size,
      mask_token_id=_MASK,
      alignment=alignment,
      layout=layout,
  )


def _causal_mask(pos, seg):
  """The brute-force AR mask: causal in logical positions, per segment."""
  mask = (
      (pos[:, None, :] <= pos[:, :, None])
      & (seg[:, None, :] == seg[:, :, None])
      & (seg[:, None, :] > 0)
  )
  # Rows without packing: exactly Tunix's own causal mask.
  tunix = generate_utils.make_causal_attn_mask(
      jnp.asarray(seg[:2] > 0), pos.shape[1]
  )
  np.testing.assert_array_equal(mask[:2], tunix)
  return mask


def _random_tokens(rng, shape):
  tokens = rng.integers(0, _VOCAB - 1, shape)
  return np.where(tokens >= _MASK, tokens + 1, tokens)  # Never the mask id.


def _canvas(seed: int, layout: str, length: int = _LENGTH):
  """Positions, segments, clean and noisy tokens for a `[3, length]` batch."""
  rng = np.random.default_rng(seed)
  pos = np.zeros((3, length), np.int32)
  seg = np.ones((3, length), np.int32)
  pos[0] = np.arange(length)
  pad = 3  # Row 1: left padding.
  seg[1, :pad] = 0
  pos[1, pad:] = np.arange(length - pad)
  split = 6  # Row 2: two packed documents.
  pos[2] = np.concatenate([np.arange(split), np.arange(length - split)])
  seg[2, split:] = 2
  if layout == "shuffled":
    for row in range(3):
      perm = rng.permutation(length)
      pos[row], seg[row] = pos[row, perm], seg[row, perm]
  clean = _random_tokens(rng, (3, length))
  noisy = np.where(rng.random((3, length)) < 0.5, _MASK, clean)
  return pos, seg, clean, noisy


class DiffusionLogitsTest(parameterized.TestCase):

  def test_block_size_one_is_the_ar_model_bit_for_bit(self):
    pos, seg, clean, _ = _canvas(0, "canonical")
    got = np.asarray(
        _logits(
            _MODEL, clean, pos, seg, None, _config(1, bd_config.SAME_POSITION)
        )
    )
    want = np.asarray(_MODEL(clean, pos, None, _causal_mask(pos, seg))[0])
    keep = np.arange(_VOCAB) != _MASK
    np.testing.assert_array_equal(got[..., keep], want[..., keep])
    np.testing.assert_array_equal(
        got[..., _MASK], np.float32(diffusion_lm.MASKED_LOGIT)
    )

  @parameterized.parameters(bd_config.SINGLE_CANVAS, bd_config.CLEAN_CONTEXT)
  def test_shifted_block_size_one_is_the_ar_model_shifted(self, layout):
    pos, seg, clean, _ = _canvas(1, "canonical")
    config = _config(1, bd_config.SHIFTED, layout)
    clean_arg = clean if layout == bd_config.CLEAN_CONTEXT else None
    got = np.asarray(_logits(_MODEL, clean, pos, seg, clean_arg, config))
    ar = np.asarray(_MODEL(clean, pos, None, _causal_mask(pos, seg))[0])
    keep = np.arange(_VOCAB) != _MASK
    # The clean-context forward runs over [noisy ; clean], twice the length
    # of the AR forward, so XLA may reduce its matmuls in another order: equal
    # to float32 rounding, not bit for bit (the same-position test is).
    tol = 1e-5 if layout == bd_config.CLEAN_CONTEXT else 1e-6
    for row, i in np.ndindex(pos.shape):
      # A token's predictor is the previous logical position of its segment.
      match = (seg[row] == seg[row, i]) & (pos[row] == pos[row, i] - 1)
      if seg[row, i] and match.any():
        want = ar[row, np.flatnonzero(match)[0]]
      else:  # Position 0 and the pads have none: zero logits.
        want = np.zeros(_VOCAB)
      np.testing.assert_allclose(
          got[row, i, keep], want[keep], atol=tol, rtol=tol
      )

  @parameterized.product(
      alignment=_ALIGNMENTS,
      block_size=(1, 3, 4, 5),
      layout=("canonical", "shuffled"),
  )
  def test_clean_context_equals_single_canvas_with_clean_prefix(
      self, alignment, block_size, layout
  ):
    pos, seg, clean, noisy = _canvas(block_size, layout)
    got = np.asarray(
        _logits(
            _MODEL,
            noisy,
            pos,
            seg,
            clean,
            _config(block_size, alignment, bd_config.CLEAN_CONTEXT),
        )
    )
    blocks = pos // block_size
    real = seg > 0
    for b in range(blocks.max() + 1):
      canvas = np.where(blocks < b, clean, noisy)
      want = np.asarray(
          _logits(
              _MODEL, canvas, pos, seg, None, _config(block_size, alignment)
          )
      )
      here = (blocks == b) & real
      np.testing.assert_allclose(got[here], want[here], atol=1e-5, rtol=1e-5)

  def test_shifted_follows_logical_positions(self):
    pos, seg, clean, noisy = _canvas(5, "canonical")
    config = _config(3, bd_config.SHIFTED, bd_config.CLEAN_CONTEXT)
    want = np.asarray(_logits(_MODEL, noisy, pos, seg, clean, config))
    perm = np.random.default_rng(5).permutation(pos.shape[1])
    got = np.asarray(
        _logits(
            _MODEL,
            noisy[:, perm],
            pos[:, perm],
            seg[:, perm],
            clean[:, perm],
            config,
        )
    )
    np.testing.assert_allclose(got, want[:, perm], atol=1e-5, rtol=1e-5)
    # Undefined: position 0 of each document and the pads.
    undefined = (pos == 0) | (seg == 0)
    keep = np.arange(_VOCAB) != _MASK
    self.assertTrue((want[undefined][:, keep] == 0).all())
    self.assertFalse((want[~undefined][:, keep] == 0).all(axis=-1).any())

  def test_mask_token_gets_zero_probability_and_finite_gradients(self):
    pos, seg, clean, noisy = _canvas(2, "canonical")
    config = _config(4, bd_config.SHIFTED, bd_config.CLEAN_CONTEXT)
    targets = np.where(seg > 0, clean, _MASK)  # Also score the mask id.
    weights = jnp.asarray((seg > 0) & (pos > 0), jnp.float32)

    # The Qwen3's raw logits for exactly this canvas and mask, recorded so
    # that the loss below compiles without the model.
    recorded = []

    def recording_model(*args):
      recorded.append(_MODEL(*args))
      return recorded[-1]

    diffusion_lm.diffusion_logits_fn(
        recording_model, noisy, pos, seg, config=config, clean_tokens=clean
    )
    ((raw, _),) = recorded

    @jax.jit
    def loss(bias):
      # The gradient at the model's raw logits: finite there means finite
      # for every parameter behind them.
      logits = diffusion_lm.diffusion_logits_fn(
          lambda *args: (raw + bias, None),
          noisy,
          pos,
          seg,
          config=config,
          clean_tokens=clean,
      )
      logp = scoring.log_probs(logits, temperature=0.5)
      entropy = -jnp.sum(jnp.exp(logp) * logp, axis=-1)
      nll = -scoring.token_log_probs(logits, targets, temperature=0.5)
      return jnp.sum((nll + entropy) * weights) / jnp.sum(weights), logits

    grads, logits = jax.grad(loss, has_aux=True)(jnp.zeros(raw.shape))
    self.assertTrue(np.isfinite(np.asarray(grads)).all())
    self.assertGreater(float(jnp.abs(grads).sum()), 0.0)
    np.testing.assert_array_equal(grads[..., _MASK], 0.0)
    for temperature in (1.0, 0.01, 7.0):
      logp = scoring.log_probs(logits, temperature)
      self.assertTrue(np.isfinite(np.asarray(logp)).all())
      np.testing.assert_array_equal(jnp.exp(logp)[..., _MASK], 0.0)
      np.testing.assert_allclose(
          jax.nn.logsumexp(logp, axis=-1), 0.0, atol=1e-5
      )
      np.testing.assert_allclose(
          scoring.token_log_probs(logits, targets, temperature),
          np.take_along_axis(logp, targets[..., None], -1)[..., 0],
          atol=1e-5,
      )
    np.testing.assert_array_equal(jax.nn.softmax(logits)[..., _MASK], 0.0)

  def test_forward_gives_final_hidden_states_or_logits(self):
    # `hidden_states` decides which; the head maps the first to the second.
    pos, seg, _, noisy = _canvas(0, "canonical")
    mask = _causal_mask(pos, seg)
    call = lambda hidden: diffusion_lm.forward(
        _QWEN3, noisy, pos, None, mask, hidden_states=hidden
    )[0]
    hidden, logits = call(True), call(False)
    self.assertEqual(hidden.shape, noisy.shape + (_QWEN3.config.embed_dim,))
    self.assertEqual(logits.dtype, jnp.float32)
    rows = lm_head.Rows(hidden, lm_head.model_head(_QWEN3))
    np.testing.assert_allclose(
        lm_head.dense_logits(rows), logits, atol=1e-5, rtol=0
    )

  def test_bad_inputs_name_the_argument(self):
    pos, seg, clean, noisy = _canvas(3, "canonical")
    single = _config(2, bd_config.SAME_POSITION)
    ctx = _config(2, bd_config.SHIFTED, bd_config.CLEAN_CONTEXT)
    fn = diffusion_lm.diffusion_logits_fn
    cases = [
        (
            "positions",
            lambda: fn(_MODEL, noisy, pos[:, :5], seg, config=single),
        ),
        ("segment_ids", lambda: fn(_MODEL, noisy, pos, seg[:2], config=single)),
        ("tokens", lambda: fn(_MODEL, noisy[0], pos, seg, config=single)),
        ("positions", lambda: fn(_MODEL, noisy, pos * 1.0, seg, config=single)),
        ("needs clean_tokens", lambda: fn(_MODEL, noisy, pos, seg, config=ctx)),
        (
            "clean_tokens",
            lambda: fn(
                _MODEL, noisy, pos, seg, config=ctx, clean_tokens=clean[:, 1:]
            ),
        ),
        (
            "only used by",
            lambda: fn(
                _MODEL, noisy, pos, seg, config=single, clean_tokens=clean
            ),
        ),
        (
            "BlockDiffusionConfig",
            lambda: fn(_MODEL, noisy, pos, seg, config={}),
        ),
        (
            "mask_token_id=500 is outside the model vocabulary of size 96",
            lambda: fn(
                _MODEL,
                noisy,
                pos,
                seg,
                config=bd_config.BlockDiffusionConfig(2, 500),
                clean_tokens=clean,
            ),
        ),
        (
            # A model without a config: checked against the logits' width.
            "logits vocabulary of size 96",
            lambda: fn(
                lambda *args: _MODEL(*args),
                noisy,
                pos,
                seg,
                config=bd_config.BlockDiffusionConfig(2, 500),
                clean_tokens=clean,
            ),
        ),
        (
            "use_flash_attention=True",
            lambda: fn(_FLASH_MODEL, noisy, pos, seg, config=single),
        ),
        ("temperature", lambda: scoring.log_probs(noisy * 1.0, 0.0)),
        ("temperature", lambda: scoring.log_probs(noisy * 1.0, True)),
    ]
    for message, call in cases:
      with self.subTest(message):
        with self.assertRaisesRegex(ValueError, message):
          call()


def _with_remat(model, mode):
  """`model` with `model.remat=mode` on every module's Tunix config."""
  config = dataclasses.replace(
      model.config, remat_config=families.remat_config(model.config, mode)
  )
  copy = nnx.merge(*nnx.split(model))
  for _, module in nnx.iter_modules(copy):
    if hasattr(module, "config"):
      module.config = config
  return copy


class LayerScanTest(parameterized.TestCase):
  """A scanned forward equals Tunix's per-layer forward."""

  @parameterized.named_parameters(
      ("qwen3_single_canvas", "qwen3", "none", False, bd_config.SINGLE_CANVAS),
      ("qwen3_lora_remat", "qwen3", "decoder", True, bd_config.CLEAN_CONTEXT),
      ("qwen2_remat_block", "qwen2", "block", False, bd_config.CLEAN_CONTEXT),
      ("llama3", "llama3", "none", False, bd_config.SINGLE_CANVAS),
  )
  def test_logits_and_gradients_equal_the_layer_loop(
      self, family, remat, with_lora, layout
  ):
    model = _with_remat(test_common.tiny_family_model(family, _VOCAB), remat)
    wrt = nnx.Param
    if with_lora:
      model = lora.apply_lora(model, rank=2, alpha=4.0)
      wrt = nnx.LoRAParam
      # B starts at zero: make the adapters count.
      for _, param in nnx.iter_graph(model):
        if isinstance(param, nnx.LoRAParam):
          param[...] = param[...] + 0.1
    # The scan runs: every layer of one structure (LoRA's included).
    self.assertIsInstance(
        layer_scan.scanned(model).layers[0], layer_scan.ScannedLayers
    )
    pos, seg, clean, noisy = _canvas(5, "canonical")
    config = _config(4, bd_config.SHIFTED, layout)
    clean = clean if layout == bd_config.CLEAN_CONTEXT else None

    def loss_and_grads(scan_layers):
      def loss(model):
        logits = diffusion_lm.diffusion_logits_fn(
            model,
            noisy,
            pos,
            seg,
            config=config,
            clean_tokens=clean,
            scan_layers=scan_layers,
        )
        weights = jnp.asarray(seg > 0, jnp.float32)[..., None]
        return jnp.sum(jax.nn.log_softmax(logits) * weights), logits

      grad = nnx.value_and_grad(
          loss, has_aux=True, argnums=nnx.DiffState(0, wrt)
      )
      (_, logits), grads = nnx.jit(grad)(model)
      return logits, nnx.to_pure_dict(grads)

    logits, grads = loss_and_grads(True)
    want_logits, want_grads = loss_and_grads(False)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-6, atol=1e-5)
    leaves = jax.tree_util.tree_leaves_with_path(want_grads)
    self.assertLen(jax.tree.leaves(grads), len(leaves))
    for path, want in leaves:
      got = grads
      for key in path:
        got = got[key.key]
      scale = float(np.abs(want).max())
      self.assertGreater(scale, 0, jax.tree_util.keystr(path))
      np.testing.assert_allclose(
          got, want, atol=1e-5 * scale, err_msg=jax.tree_util.keystr(path)
      )

  def test_what_cannot_scan_keeps_the_loop(self):
    # Not a Tunix decoder (a wrapper): called as it is.
    self.assertIs(layer_scan.scanned(_MODEL), _MODEL)
    # One layer: nothing to scan.
    one = test_common.tiny_qwen3(_VOCAB, num_layers=1)
    self.assertIs(layer_scan.scanned(one), one)
    # Its decoding cache keeps Tunix's layout, which the loop reads.
    cache = block_cache.init_block_cache(one, 1, 8, scan_layers=True)
    self.assertFalse(layer_scan.is_stacked(cache.kv))
    with self.assertRaisesRegex(ValueError, "stacked KV cache .* needs a"):
      layer_scan.call_stacked(
          one, layer_scan.stack_cache(cache.kv), lambda m, kv: m(kv)
      )
    # A scanned copy refuses a cache in Tunix's per-layer layout.
    layer_cache = block_cache.init_block_cache(_QWEN3, 1, 8).kv["layer_0"]
    tokens = jnp.zeros((1, 4), jnp.int32)
    with self.assertRaisesRegex(ValueError, "layer_scan.stack_cache"):
      layer_scan.scanned(_QWEN3)(
          tokens,
          tokens,
          {"layer_0": layer_cache},
          jnp.ones((1, 4, 8), bool),
      )
    # LoRA on the first layer only: two structures.
    model = lora.apply_lora(
        _QWEN3, rank=2, alpha=4.0, module_path="layers/0/.*"
    )
    self.assertIs(layer_scan.scanned(model), model)


if __name__ == "__main__":
  absltest.main()
