# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Exporting in SDAR's and Fast-dLLM v2's formats, against their own code.

`testdata/bd_formats/export_{sdar,fast_dllm_v2}/oracle.npz` is what the
formats' own PyTorch code computed on an export of a deterministic tiny
model of ours (`bd_export_tiny`; `tools/bd_formats/export_oracle.py`
regenerates it): the files it loaded, its inference logits, its greedy
block decoders' tokens. These tests re-create the export, check that it is
the one their code ran, and check our decoding of it (imported back as
`model.checkpoint` is) against theirs; then round trips and refusals.
"""

import functools
import hashlib
import json
import os
import tempfile

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.generate import denoise
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd_tests.models import bd_export_tiny

_DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
_SDAR, _FAST = bd_formats.SDAR, bd_formats.FAST_DLLM_V2
_PARAMS = [dict(testcase_name=f, fmt=f) for f in (_SDAR, _FAST)]
_MASK_ID = bd_export_tiny.MASK_ID
# float32 on both sides (as bd_formats_test).
_ATOL = 1e-4


def _oracle(fmt):
  path = os.path.join(_DATA, "bd_formats", f"export_{fmt}", "oracle.npz")
  oracle = dict(np.load(path))
  return oracle, json.loads(str(oracle.pop("meta")))


def _read(directory, name):
  with open(os.path.join(directory, name)) as f:
    return json.load(f)


@functools.partial(nnx.jit, static_argnames=("config",))
def _jitted_logits(model, tokens, positions, *, config):
  return diffusion_lm.diffusion_logits_fn(
      model, tokens, positions, None, config=config
  )


def _logits(model, tokens, bd):
  """Our target-aligned logits under the block-causal mask, as NumPy."""
  bd = bd_config.BlockDiffusionConfig(
      **{**bd.to_dict(), "layout": bd_config.SINGLE_CANVAS}
  )
  tokens = jnp.asarray(tokens, jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
  return np.asarray(_jitted_logits(model, tokens, positions, config=bd))


def _theirs(logits):
  """Ours as their softmax sees them: the mask's raw logit is 0 (its head
  column is zero), where ours is `MASKED_LOGIT` by design."""
  out = np.array(logits, np.float64)
  out[..., _MASK_ID] = 0.0
  return out


class ExportOracleTest(parameterized.TestCase):
  """Our export, loaded and decoded by their code (the oracle)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.TemporaryDirectory()
    cls.dirs, cls.models = {}, {}
    for fmt in (_SDAR, _FAST):
      cls.dirs[fmt] = os.path.join(cls.tmp.name, fmt)
      bd_export_tiny.export(fmt, cls.dirs[fmt])
      cls.models[fmt], _ = hf_checkpoint.load(cls.dirs[fmt])

  @classmethod
  def tearDownClass(cls):
    cls.tmp.cleanup()
    super().tearDownClass()

  @parameterized.named_parameters(_PARAMS)
  def test_the_export_is_the_one_their_code_ran(self, fmt):
    _, meta = _oracle(fmt)
    directory = self.dirs[fmt]
    with open(os.path.join(directory, "model.safetensors"), "rb") as f:
      self.assertEqual(
          hashlib.sha256(f.read()).hexdigest(), meta["weights_sha256"]
      )
    for name in ("config.json", "generation_config.json"):
      ours = _read(directory, name)
      theirs = dict(meta["exported_files"][name])
      ours.pop("transformers_version", None)
      theirs.pop("transformers_version", None)
      self.assertEqual(ours, theirs, name)
    tokenizer_config = _read(directory, "tokenizer_config.json")
    for key in ("eos_token", "pad_token", "mask_token"):
      self.assertEqual(
          tokenizer_config[key],
          meta["exported_files"]["tokenizer_config.json"][key],
      )
    # transformers 4.5x (their code's) reads only this key as a list.
    self.assertNotIn("extra_special_tokens", tokenizer_config)
    self.assertIn("|<MASK>|", tokenizer_config["additional_special_tokens"])
    # No modeling code unless export.reference_code names it.
    self.assertEqual(
        [f for f in os.listdir(directory) if f.endswith(".py")], []
    )

  def test_sdar_fields_as_their_code_read_them(self):
    config = _read(self.dirs[_SDAR], "config.json")
    spec = bd_formats.FORMATS[_SDAR]
    self.assertEqual(config["architectures"], ["SDARForCausalLM"])
    self.assertEqual(config["model_type"], "sdar")
    self.assertEqual(config["auto_map"], spec.auto_map)
    self.assertEqual(
        (config["block_size"], config["mask_token_id"]), (4, _MASK_ID)
    )
    self.assertFalse(config["attention_bias"])
    self.assertFalse(config["use_sliding_window"])
    # SDAR's convention: EOS = pad = <|endoftext|>; the turn end first in
    # the generation config.
    self.assertEqual(config["eos_token_id"], 0)
    generation = _read(self.dirs[_SDAR], "generation_config.json")
    self.assertEqual(generation["eos_token_id"], [2, 0])
    _, meta = _oracle(_SDAR)
    view = meta["their_view"]
    self.assertEqual(
        (view["config_class"], view["model_class"]),
        ("SDARConfig", "SDARForCausalLM"),
    )
    self.assertEqual((view["block_size"], view["mask_token_id"]), (4, _MASK_ID))
    self.assertEqual(view["tokenizer_mask_token_id"], _MASK_ID)
    self.assertEqual(view["tokenizer_eos_token"], "<|endoftext|>")

  def test_fast_dllm_fields_as_their_code_read_them(self):
    config = _read(self.dirs[_FAST], "config.json")
    spec = bd_formats.FORMATS[_FAST]
    self.assertEqual(config["architectures"], ["Fast_dLLM_QwenForCausalLM"])
    self.assertEqual(config["model_type"], "Fast_dLLM_Qwen")
    self.assertEqual(config["auto_map"], spec.auto_map)
    self.assertEqual(config["bd_size"], 8)
    self.assertNotIn("mask_token_id", config)  # Their code hard-codes it.
    self.assertEqual(config["layer_types"], ["full_attention"] * 2)
    _, meta = _oracle(_FAST)
    view = meta["their_view"]
    self.assertEqual(
        (view["config_class"], view["model_class"], view["bd_size"]),
        ("Fast_dLLM_QwenConfig", "Fast_dLLM_QwenForCausalLM", 8),
    )
    self.assertEqual(view["tokenizer_mask_token_id"], _MASK_ID)
    self.assertEqual(view["tokenizer_eos_token"], "<|im_end|>")

  @parameterized.named_parameters(_PARAMS)
  def test_imported_back_with_the_same_settings(self, fmt):
    directory = self.dirs[fmt]
    bd = bd_export_tiny.TINY[fmt].bd
    self.assertEqual(
        bd_formats.load_settings(directory, "model.checkpoint"), bd
    )
    self.assertEqual(bd_formats.settings(directory), bd)  # Format fields.
    tokenizer = bd_formats.load_tokenizer(directory)
    ours = bd_export_tiny.tokenizer()
    self.assertEqual(
        (tokenizer.eos_token, tokenizer.pad_token, tokenizer.mask_token_id),
        (ours.eos_token, ours.pad_token, _MASK_ID),
    )
    self.assertEqual(tokenizer.get_vocab(), ours.get_vocab())

  @parameterized.named_parameters(_PARAMS)
  def test_logits_match_theirs(self, fmt):
    oracle, _ = _oracle(fmt)
    bd = bd_formats.load_settings(self.dirs[fmt])
    ours = _logits(self.models[fmt], oracle["logits_tokens"], bd)
    theirs = oracle["logits"]
    if bd.alignment == bd_config.SHIFTED:
      ours, theirs = ours[:, 1:], theirs[:, :-1]  # Their raw i-1 is our i.
    diff = np.abs(np.delete(ours - theirs, _MASK_ID, axis=-1)).max()
    self.assertLess(diff, _ATOL)
    # Our logits of the original model, bit for bit.
    original = _logits(bd_export_tiny.model(fmt), oracle["logits_tokens"], bd)
    np.testing.assert_array_equal(
        _logits(self.models[fmt], oracle["logits_tokens"], bd)[..., :400],
        original[..., :400],
    )

  def _decode(self, fmt, max_new_tokens, **settings):
    oracle, _ = _oracle(fmt)
    prompts = oracle["decode_prompts"]
    out = denoise.Denoiser(
        self.models[fmt],
        bd=bd_formats.load_settings(self.dirs[fmt]),
        config=denoise.DenoiseConfig(
            max_new_tokens=max_new_tokens,
            max_prompt_length=prompts.shape[1],
            **settings,
        ),
    )(np.where(prompts < 0, 0, prompts), oracle["decode_prompt_lens"])
    return oracle, out.completion_tokens

  def test_sdar_greedy_tokens_equal_theirs(self):
    # Their `low_confidence_dynamic` with `denoising_steps == block_length`
    # and a greedy sampler is our threshold rule (bd_formats_test).
    oracle, ours = self._decode(_SDAR, 19, threshold=0.9)
    run = "greedy_tau0.9"
    self.assertTrue((oracle[f"{run}_min_margin"] > 1e-5).all())
    for row, n in enumerate(oracle[f"{run}_lens"]):
      np.testing.assert_array_equal(
          ours[row, :n], oracle[f"{run}_tokens"][row, :n]
      )

  def test_fast_dllm_tokens_equal_theirs_up_to_its_rule_free_commit(self):
    # As on the imported fixture (bd_formats_test): their decoder commits a
    # block's first token before denoising the block, ours by the rule.
    oracle, ours = self._decode(
        _FAST, 24, threshold=0.9, stop_ids=(2,), pad_id=1
    )
    run = "generate_sb8"
    for row in range(3):
      first = int(np.flatnonzero(oracle[f"{run}_steps"][row] == -1)[0])
      np.testing.assert_array_equal(
          ours[row, : first + 1], oracle[f"{run}_tokens"][row, : first + 1]
      )

  def test_their_fast_dllm_decode_replayed_through_our_logits(self):
    # Every step of their `generate` (one sub-block, threshold 0.9), with
    # our logits in place of theirs: the canvas before step s holds the
    # tokens they committed before s; their rule (confidence > tau over
    # the whole vocabulary, else the most confident) on our logits must
    # commit exactly their positions, with their tokens. Whole blocks only
    # (a stop mid-block hides the rest of its canvas). Canvases are padded
    # with masks to one width: later blocks are invisible to earlier ones.
    oracle, meta = _oracle(_FAST)
    bd = bd_formats.load_settings(self.dirs[_FAST])
    block, tau, run = bd.block_size, meta["threshold"], "generate_sb8"
    width = 48
    canvases, checks = [], []
    for row, p_len in enumerate(oracle["decode_prompt_lens"]):
      n = oracle[f"{run}_lens"][row]
      final = np.concatenate([
          oracle["decode_prompts"][row, :p_len],
          oracle[f"{run}_tokens"][row, :n],
      ])
      steps = np.concatenate(
          [np.full(p_len, -2), oracle[f"{run}_steps"][row, :n]]
      )
      for start in range(0, len(final) - block + 1, block):
        span = slice(start, start + block)
        for s in range(steps[span].max() + 1):
          canvas = np.full(width, _MASK_ID)
          canvas[: start + block] = final[: start + block]
          hidden = np.arange(start, start + block)[steps[span] >= s]
          canvas[hidden] = _MASK_ID
          canvases.append(canvas)
          checks.append((final, steps, start, s, hidden))
    logits = _theirs(_logits(self.models[_FAST], np.stack(canvases), bd))
    committed = 0
    for (final, steps, start, s, hidden), row_logits in zip(checks, logits):
      probs = np.exp(row_logits - row_logits.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      conf, token = probs[hidden].max(-1), probs[hidden].argmax(-1)
      commit = conf > tau
      commit[conf.argmax()] = True
      np.testing.assert_array_equal(hidden[commit], hidden[steps[hidden] == s])
      np.testing.assert_array_equal(token[commit], final[hidden[commit]])
      self.assertGreater(np.abs(conf - tau).min(), 1e-5)
      committed += int(commit.sum())
      if s == 0 and steps[start] == -1:
        # Their rule-free first token: the argmax of the logit before it.
        self.assertEqual(row_logits[start].argmax(), final[start])
        committed += 1
    self.assertGreater(committed, 30)


class RoundTripTest(parameterized.TestCase):
  """Export in a format, import: the same model and settings."""

  def _round_trip(self, model, tokenizer, bd, fmt, source):
    tmp = tempfile.TemporaryDirectory()
    self.addCleanup(tmp.cleanup)
    bd_export.export_block_diffusion(
        model,
        tokenizer,
        tmp.name,
        bd=bd,
        chat_options=chat.ChatOptions(),
        source=source,
        fmt=fmt,
    )
    self.assertEqual(bd_formats.read_dir(tmp.name)[0].name, fmt)
    self.assertEqual(bd_formats.settings(tmp.name), bd)
    self.assertEqual(bd_formats.load_settings(tmp.name), bd)
    back = bd_formats.load_tokenizer(tmp.name)
    self.assertEqual(
        (back.eos_token_id, back.pad_token_id, back.get_vocab()),
        (tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.get_vocab()),
    )
    # The stop ids too, though the format's generation config lists the
    # pad (an export of ours) or their pad (SDAR's own, e.g. sdar_tiny).
    self.assertEqual(
        special_ids.checkpoint_stop_ids(back),
        special_ids.checkpoint_stop_ids(tokenizer),
    )
    exported, _ = hf_checkpoint.load(tmp.name)
    tokens = np.random.default_rng(0).integers(3, 300, (2, 16))
    np.testing.assert_array_equal(
        _logits(exported, tokens, bd), _logits(model, tokens, bd)
    )
    return tmp.name

  @parameterized.named_parameters(
      (
          "sdar_from_qwen3",
          "q3_tied_hd32",
          _SDAR,
          "<|mask|>",
          4,
          bd_config.SAME_POSITION,
      ),
      (
          "fast_dllm_from_qwen2",
          "qwen2_untied",
          _FAST,
          "|<MASK>|",
          8,
          bd_config.SHIFTED,
      ),
  )
  def test_from_an_hf_checkpoint(self, name, fmt, token, block, alignment):
    directory = os.path.join(_DATA, "hf", name)
    model, _ = hf_checkpoint.load(directory)
    tokenizer = bd_formats.load_tokenizer(directory)
    model, _, mask_id = mask_token_lib.provision_mask_token(
        model, tokenizer, token
    )
    bd = bd_config.BlockDiffusionConfig(
        block_size=block, mask_token_id=mask_id, alignment=alignment
    )
    source = hf_checkpoint.read_source(directory)
    out = self._round_trip(model, tokenizer, bd, fmt, source)
    config = _read(out, "config.json")
    # transformers 5's `rope_parameters` (this source's) is written as the
    # `rope_theta` their transformers 4.5x reads (else it rotates with
    # 10000), the dtype as `torch_dtype`.
    self.assertIn("rope_parameters", source.config)
    self.assertNotIn("rope_parameters", config)
    self.assertEqual(
        (config["rope_theta"], config["rope_scaling"]), (1_000_000, None)
    )
    self.assertEqual(config["torch_dtype"], "float32")
    # The source's other fields stay (but those the format renames).
    for key, value in source.config.items():
      if key not in (
          "rope_parameters",
          "architectures",
          "model_type",
          "vocab_size",
          "dtype",
          "torch_dtype",
          "eos_token_id",
          "bos_token_id",
      ):
        self.assertEqual(config[key], value, key)

  @parameterized.named_parameters(
      ("sdar", "sdar_tiny", _SDAR), ("fast_dllm", "fast_dllm_v2_tiny", _FAST)
  )
  def test_from_a_checkpoint_in_the_format(self, name, fmt):
    directory = os.path.join(_DATA, "bd_formats", name)
    model, _ = hf_checkpoint.load(directory)
    source = hf_checkpoint.read_source(directory)
    out = self._round_trip(
        model,
        bd_formats.load_tokenizer(directory),
        bd_formats.load_settings(directory),
        fmt,
        source,
    )
    config = _read(out, "config.json")
    for key, value in source.config.items():
      if key != "transformers_version":
        self.assertEqual(config[key], value, key)
    # [<|im_end|>, <|endoftext|>] as theirs, not the pad an SDAR import
    # gives (bd_formats.PAD_TOKEN), which neither format's code
    # stops at.
    generation = _read(out, "generation_config.json")
    self.assertEqual(generation["eos_token_id"], [2, 0])


class RefusalTest(parameterized.TestCase):

  def test_export_refuses_before_writing(self):
    out = os.path.join(self.create_tempdir().full_path, "export")
    tiny = bd_export_tiny.TINY[_FAST]
    with self.assertRaisesRegex(ValueError, "bd.alignment=same_position"):
      bd_export.export_block_diffusion(
          bd_export_tiny.model(_FAST),
          bd_export_tiny.tokenizer(),
          out,
          bd=tiny.bd,
          chat_options=chat.ChatOptions(),
          source=None,
          fmt=_SDAR,
      )
    self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
  absltest.main()
