# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Importing SDAR and Fast-dLLM v2 checkpoints, against their own code.

The fixtures in `testdata/bd_formats/` are tiny checkpoints in each format
with what the format's own PyTorch code computed on them (`oracle.npz`).
An imported fixture must reproduce those logits through
`diffusion_logits_fn`, with the settings the format's code uses; what the
project cannot represent must be refused, naming the field.
"""

import functools
import json
import os
import pathlib
import shutil
import tempfile

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib
from safetensors import numpy as safetensors_numpy
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings
from tunix_bd.generate import text
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats
from tunix_bd.models import hf_checkpoint

_DIR = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "testdata", "bd_formats"
)
_SDAR, _FAST = "sdar_tiny", "fast_dllm_v2_tiny"
_EXPECTED = {
    _SDAR: (
        bd_config.BlockDiffusionConfig(
            block_size=4,
            mask_token_id=400,
            alignment=bd_config.SAME_POSITION,
            layout=bd_config.CLEAN_CONTEXT,
        ),
        qwen3_lib.Qwen3,
    ),
    _FAST: (
        bd_config.BlockDiffusionConfig(
            block_size=8,
            mask_token_id=400,
            alignment=bd_config.SHIFTED,
            layout=bd_config.CLEAN_CONTEXT,
        ),
        qwen2_lib.Qwen2,
    ),
}
_PARAMS = [dict(testcase_name=n, name=n) for n in _EXPECTED]
# float32 on both sides; the oracle's flex attention vs dense SDPA differ by
# 2.7e-5 on the same logits (meta `train_logits_flex_vs_sdpa_max_abs`).
_ATOL = 1e-4
_MASK_ID = 400


def _oracle(name):
  return dict(np.load(os.path.join(_DIR, name, "oracle.npz")))


@functools.partial(nnx.jit, static_argnames=("config",))
def _jitted_logits(model, tokens, positions, clean_tokens, *, config):
  # Jitted: eager dispatch of a first call costs seconds per shape.
  return diffusion_lm.diffusion_logits_fn(
      model, tokens, positions, None, config=config, clean_tokens=clean_tokens
  )


def _logits(model, tokens, bd, clean=None):
  """Our target-aligned logits of `tokens` at positions 0.., as NumPy."""
  tokens = jnp.asarray(tokens, jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
  clean = None if clean is None else jnp.asarray(clean, jnp.int32)
  return np.asarray(_jitted_logits(model, tokens, positions, clean, config=bd))


def _without_mask(logits):
  """Logits without the mask column (ours is `MASKED_LOGIT` by design)."""
  return np.delete(logits, _MASK_ID, axis=-1)


def _max_diff(a, b):
  return float(np.max(np.abs(_without_mask(a) - _without_mask(b))))


class ImportTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.models = {}
    for name in _EXPECTED:
      cls.models[name], _ = hf_checkpoint.load(os.path.join(_DIR, name))

  @parameterized.named_parameters(_PARAMS)
  def test_detected_settings_and_family(self, name):
    directory = os.path.join(_DIR, name)
    expected_bd, model_class = _EXPECTED[name]
    self.assertEqual(
        bd_formats.load_settings(directory, "model.checkpoint"), expected_bd
    )
    self.assertIsNone(bd_formats.load_extra(directory, "chat"))
    self.assertIsInstance(self.models[name], model_class)

  @parameterized.named_parameters(_PARAMS)
  def test_inference_logits_match_the_oracle(self, name):
    # Their inference forward: the canvas under the block-causal mask.
    oracle = _oracle(name)
    bd = bd_config.BlockDiffusionConfig(
        **{**_EXPECTED[name][0].to_dict(), "layout": bd_config.SINGLE_CANVAS}
    )
    ours = _logits(self.models[name], oracle["logits_tokens"], bd)
    theirs = oracle["logits"]
    if bd.alignment == bd_config.SHIFTED:
      # Their raw logit at i - 1 is our target-aligned logit at i.
      ours, theirs = ours[:, 1:], theirs[:, :-1]
    self.assertLess(_max_diff(ours, theirs), _ATOL)
    self.assertTrue((ours[..., _MASK_ID] == diffusion_lm.MASKED_LOGIT).all())

  def test_sdar_training_logits_and_loss_match_the_oracle(self):
    oracle = _oracle(_SDAR)
    bd = _EXPECTED[_SDAR][0]
    # Their `[noisy ; clean]` layout, both copies at positions 0..15.
    np.testing.assert_array_equal(
        oracle["train_concat_tokens"],
        np.concatenate(
            [oracle["train_noisy_tokens"], oracle["train_tokens"]], 1
        ),
    )
    ours = _logits(
        self.models[_SDAR],
        oracle["train_noisy_tokens"],
        bd,
        clean=oracle["train_tokens"],
    )
    self.assertLess(_max_diff(ours, oracle["train_logits"]), _ATOL)

    # Their loss: sum of CE / p over masked tokens, over completion tokens.
    # It normalises over the mask token too, whose head row in the fixture
    # is zero (raw logit exactly 0), so that column is put back.
    logits = ours.astype(np.float64)
    logits[..., _MASK_ID] = 0.0
    log_z = np.log(np.exp(logits).sum(-1))
    labels = oracle["train_tokens"]
    ce = log_z - np.take_along_axis(logits, labels[..., None], -1)[..., 0]
    masked = oracle["train_masked"]
    loss = (ce[masked] / oracle["train_p_mask"][masked]).sum() / (
        oracle["train_labels"] != -100
    ).sum()
    self.assertAlmostEqual(loss, float(oracle["train_loss"]), delta=1e-4)

  def test_fast_dllm_training_logits_match_but_at_block_starts(self):
    oracle = _oracle(_FAST)
    bd = _EXPECTED[_FAST][0]
    rows = oracle["train_model_tokens"]
    noisy, clean = rows[:, :16], rows[:, 16:]
    ours = _logits(self.models[_FAST], noisy, bd, clean=clean)
    theirs = oracle["train_logits"]
    # Target i is predicted by their noisy-copy logit at i - 1 ...
    inner = [i for i in range(1, 16) if i % bd.block_size]
    self.assertLess(
        _max_diff(ours[:, inner], theirs[:, np.array(inner) - 1]), _ATOL
    )
    # ... but a block's first target, by ours from the previous block's
    # clean copy (as at inference), by theirs from its noisy copy: equal
    # exactly where that noisy block has no mask.
    start = bd.block_size
    prev = slice(0, start)
    for row in range(rows.shape[0]):
      diff = _max_diff(ours[row, start], theirs[row, start - 1])
      if (noisy[row, prev] == clean[row, prev]).all():
        self.assertLess(diff, _ATOL)
      else:
        self.assertGreater(diff, 1e-2)


class DecodingTest(parameterized.TestCase):
  """Our decoder against theirs where the commit rules coincide.

  Ours commits confidence >= tau and gives the mask token probability 0;
  theirs commit > tau over the whole vocabulary (the fixtures' mask logit
  is 0, one term of their softmax). No confidence of theirs lies within
  1.3e-3 of tau on SDAR's prompts (`*_min_margin`), so ties play no part.
  """

  def _decode(self, name, max_new_tokens, **settings):
    directory = os.path.join(_DIR, name)
    model, _ = hf_checkpoint.load(directory)
    oracle = _oracle(name)
    prompts = oracle["decode_prompts"]
    config = denoise.DenoiseConfig(
        max_new_tokens=max_new_tokens,
        max_prompt_length=prompts.shape[1],
        **settings,
    )
    out = denoise.Denoiser(
        model, bd=bd_formats.load_settings(directory), config=config
    )(np.where(prompts < 0, 0, prompts), oracle["decode_prompt_lens"])
    return oracle, out.completion_tokens

  def test_sdar_greedy_tokens_equal_theirs(self):
    # Their `low_confidence_dynamic` with `denoising_steps == block_length`
    # and a greedy sampler is our threshold rule; `top_k=1` sampling commits
    # each block whole at its first step, our top_k rule with k = block.
    for run, settings in (
        ("greedy_tau0.9", dict(threshold=0.9)),
        ("top1_verbatim", dict(rule=commit_rules.TOP_K, top_k=4)),
    ):
      oracle, ours = self._decode(_SDAR, 19, **settings)
      for row, n in enumerate(oracle[f"{run}_lens"]):
        np.testing.assert_array_equal(
            ours[row, :n], oracle[f"{run}_tokens"][row, :n], err_msg=run
        )

  def test_fast_dllm_agrees_up_to_its_first_rule_free_commit(self):
    # Fast-dLLM v2 commits a block's first token as the argmax of the
    # previous block's last logit before denoising the block (step -1);
    # ours holds it masked and commits it by the rule, so the canvases of
    # the block's later steps differ. Up to that token both commit alike.
    oracle, ours = self._decode(
        _FAST, 24, threshold=0.9, stop_ids=(2,), pad_id=1
    )
    run = "generate_sb8"  # One sub-block: the plain threshold rule.
    for row in range(3):
      first = int(np.flatnonzero(oracle[f"{run}_steps"][row] == -1)[0])
      np.testing.assert_array_equal(
          ours[row, : first + 1], oracle[f"{run}_tokens"][row, : first + 1]
      )


class RecipeTest(parameterized.TestCase):

  def test_sdar_tokenizer_stops_at_every_generation_config_eos(self):
    tokenizer = bd_formats.load_tokenizer(os.path.join(_DIR, _SDAR))
    # Their tokenizer: EOS = pad = <|endoftext|> (0); generation_config
    # [2, 0]. The EOS is the turn end, both ids stop, and the pad moves to
    # a new token at the first spare embedding row (config vocab_size 416).
    self.assertEqual(tokenizer.eos_token, "<|im_end|>")
    self.assertEqual(special_ids.checkpoint_stop_ids(tokenizer), (0,))
    self.assertEqual(
        (tokenizer.pad_token, tokenizer.pad_token_id),
        (bd_formats.PAD_TOKEN, 401),
    )
    self.assertEqual(tokenizer.mask_token_id, _MASK_ID)
    self.assertEqual(tokenizer.encode("a<|endoftext|>b")[1], 0)  # Unchanged.
    decode = generate_settings.DecodeSettings().denoise_config(tokenizer, 8)
    self.assertEqual((decode.stop_ids, decode.pad_id), ((2, 0), 401))
    rollout = generate_settings.OpdRollout(
        max_prompt_length=8, extra_stop_ids=(7, 0)
    )
    self.assertEqual(rollout.denoise_config(tokenizer).stop_ids, (2, 0, 7))
    special_ids.check(
        mask_token_id=_MASK_ID,
        pad_id=tokenizer.pad_token_id,
        stop_ids=decode.stop_ids,
        vocab_size=416,
    )
    # Fast-dLLM v2's decoder stops at its `stop_token` (its EOS) alone.
    fast = bd_formats.load_tokenizer(os.path.join(_DIR, _FAST))
    self.assertEqual(
        (fast.eos_token, fast.pad_token_id),
        ("<|im_end|>", 0),
    )
    self.assertEqual(special_ids.checkpoint_stop_ids(fast), ())

  def test_generation_stops_at_an_eos_that_is_their_pad(self):
    # The fixture with token 0 (<|endoftext|>, their pad, listed second in
    # generation_config) and a token t that it commits swapped in the
    # weights: the same model up to the names of two tokens, so it commits
    # 0 where the fixture commits t, and must stop there.
    directory = os.path.join(_DIR, _SDAR)
    oracle = _oracle(_SDAR)
    prompts, lens = oracle["decode_prompts"], oracle["decode_prompt_lens"]
    bd = bd_formats.load_settings(directory)
    model, _ = hf_checkpoint.load(directory)
    config = denoise.DenoiseConfig(
        max_new_tokens=16,
        max_prompt_length=prompts.shape[1],
        threshold=0.9,
        stop_ids=(2,),
        pad_id=1,
    )
    padded = np.where(prompts < 0, 1, prompts)
    before = denoise.Denoiser(model, bd=bd, config=config)(padded, lens)
    before = [list(map(int, row)) for row in before.completions]
    # t: the first token of row 0's second block not committed earlier.
    position, t = next(
        (i, x)
        for i, x in enumerate(before[0])
        if i >= 4 and x not in before[0][:i]
    )
    self.assertNotIn(t, padded)
    self.assertNotIn(0, padded)

    swapped = os.path.join(self.create_tempdir().full_path, "sdar")
    shutil.copytree(directory, swapped)
    weights = safetensors_numpy.load_file(
        os.path.join(directory, "model.safetensors")
    )
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
      weights[name][[0, t]] = weights[name][[t, 0]]
    safetensors_numpy.save_file(
        weights,
        os.path.join(swapped, "model.safetensors"),
        metadata={"format": "pt"},
    )
    converted = text.load_model(swapped)
    decode = generate_settings.DecodeSettings(
        max_new_tokens=16, threshold=0.9
    ).denoise_config(converted.tokenizer, prompts.shape[1])
    after = denoise.Denoiser(converted.model, bd=converted.bd, config=decode)(
        padded, lens
    )
    after = [list(map(int, row)) for row in after.completions]
    self.assertEqual(after[0], before[0][:position])
    self.assertEqual(after[1:], before[1:])

  def test_sdar_pad_without_a_spare_row_is_refused(self):
    directory = os.path.join(self.create_tempdir().full_path, "sdar")
    shutil.copytree(os.path.join(_DIR, _SDAR), directory)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
      config = json.load(f)
    config["vocab_size"] = 401  # No row past the tokenizer's 401 ids.
    with open(path, "w") as f:
      json.dump(config, f)
    with self.assertRaisesRegex(ValueError, r"pad .* vocab_size=401"):
      bd_formats.load_tokenizer(directory)

  def test_sdar_eos_ids_that_are_not_tokens_are_refused(self):
    directory = os.path.join(self.create_tempdir().full_path, "sdar")
    shutil.copytree(os.path.join(_DIR, _SDAR), directory)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
      json.dump({"eos_token_id": [2, 9999]}, f)
    with self.assertRaisesRegex(
        ValueError, r"generation_config\.json: eos_token_id=\[2, 9999\]"
    ):
      bd_formats.load_tokenizer(directory)

  def test_generate_recipe_runs_on_the_sdar_fixture(self):
    # pylint: disable=g-import-not-at-top
    from tunix_bd.cli import config_loading
    from tunix_bd.recipes import generate

    config = config_loading.load_config(
        pathlib.Path(__file__).parents[2] / "configs" / "generate.py",
        "tiny",
    )
    tmp = tempfile.TemporaryDirectory()
    self.addCleanup(tmp.cleanup)
    config.model.checkpoint = os.path.join(_DIR, _SDAR)
    config.workdir = tmp.name
    config.bd.alignment = bd_config.SAME_POSITION
    summary = generate.run(config)
    self.assertGreater(summary["tokens_per_forward"], 0)
    self.assertTrue(os.path.isfile(os.path.join(tmp.name, "completions.jsonl")))

  @parameterized.named_parameters(_PARAMS)
  def test_an_export_of_an_imported_model_keeps_its_format(self, name):
    # What sft/opd/grpo write at the end of a run on an imported model.
    directory = os.path.join(_DIR, name)
    model, _ = hf_checkpoint.load(directory)
    bd = bd_formats.load_settings(directory)
    tmp = tempfile.TemporaryDirectory()
    self.addCleanup(tmp.cleanup)
    bd_export.export_block_diffusion(
        model,
        bd_formats.load_tokenizer(directory),
        tmp.name,
        bd=bd,
        chat_options=chat.ChatOptions(),
        source=hf_checkpoint.read_source(directory),
    )
    self.assertEqual(
        bd_formats.read_dir(tmp.name)[0], bd_formats.read_dir(directory)[0]
    )
    self.assertEqual(bd_formats.load_settings(tmp.name), bd)
    self.assertEqual(bd_formats.settings(tmp.name), bd)
    exported, _ = hf_checkpoint.load(tmp.name)
    tokens = _oracle(name)["logits_tokens"]
    np.testing.assert_array_equal(
        _logits(exported, tokens, bd, clean=tokens),
        _logits(model, tokens, bd, clean=tokens),
    )


def _variant(test, name, change_config=None, change_tokenizer=None):
  """A copy of a fixture's config and tokenizer files, changed.

  `change_config` edits `config.json`, `change_tokenizer` both
  `tokenizer_config.json` and `tokenizer.json`; each takes the parsed file.
  """
  tmp = tempfile.TemporaryDirectory()
  test.addCleanup(tmp.cleanup)
  for f in os.listdir(os.path.join(_DIR, name)):
    if f.endswith((".json", ".jinja")):
      shutil.copy(os.path.join(_DIR, name, f), tmp.name)
  for file, change in (
      ("config.json", change_config),
      ("tokenizer_config.json", change_tokenizer),
      ("tokenizer.json", change_tokenizer),
  ):
    if change is None:
      continue
    path = os.path.join(tmp.name, file)
    with open(path) as f:
      content = json.load(f)
    change(content)
    with open(path, "w") as f:
      json.dump(content, f)
  return tmp.name


def _set(**changes):
  return lambda c: c.update(changes)


def _drop(key):
  return lambda c: c.pop(key, None)


def _rename_mask_token(content):
  """Renames `|<MASK>|` to `<|mask|>` in a tokenizer file."""
  text = json.dumps(content).replace("|<MASK>|", "<|mask|>")
  content.clear()
  content.update(json.loads(text))


class RefusalTest(parameterized.TestCase):

  @parameterized.named_parameters(
      (
          "rope_scaling",
          _SDAR,
          _set(rope_scaling={"rope_type": "yarn"}),
          None,
          "rope_scaling",
      ),
      (
          "other_modeling_code",
          _SDAR,
          _set(auto_map={"AutoModelForCausalLM": "mine.Model"}),
          None,
          "auto_map",
      ),
      ("no_block_size", _SDAR, _drop("block_size"), None, "block_size"),
      (
          "mask_outside_vocab",
          _SDAR,
          _set(mask_token_id=999),
          _drop("mask_token"),
          "outside the model vocabulary",
      ),
      (
          "mask_disagrees_with_tokenizer",
          _SDAR,
          _set(mask_token_id=401),
          None,
          "mask_token_id=401",
      ),
      (
          "mask_is_a_text_token",
          _SDAR,
          _set(mask_token_id=50),
          _drop("mask_token"),
          "ordinary text token",
      ),
      (
          "attention_bias",
          _SDAR,
          _set(attention_bias=True),
          None,
          "attention_bias",
      ),
      (
          "architecture_mismatch",
          _SDAR,
          _set(architectures=["Qwen3ForCausalLM"]),
          None,
          "architectures",
      ),
      (
          "sliding_window",
          _FAST,
          _set(use_sliding_window=True),
          None,
          "use_sliding_window",
      ),
      ("bad_bd_size", _FAST, _set(bd_size=0), None, "bd_size"),
      ("no_mask_token", _FAST, None, _rename_mask_token, r"\|<MASK>\|"),
  )
  def test_refused_naming_the_field(self, name, config, tokenizer, pattern):
    directory = _variant(self, name, config, tokenizer)
    with self.assertRaisesRegex(ValueError, pattern):
      bd_formats.load_settings(directory, "model.checkpoint")

  def test_load_refuses_before_reading_weights(self):
    directory = _variant(
        self, _SDAR, _set(rope_scaling={"rope_type": "linear", "factor": 2.0})
    )
    with self.assertRaisesRegex(ValueError, "sdar checkpoint.*rope_scaling"):
      hf_checkpoint.load(directory)

  def test_other_configs_are_not_a_format(self):
    self.assertIsNone(bd_formats.detect({"model_type": "qwen3"}))
    with self.assertRaisesRegex(ValueError, "not a block-diffusion"):
      bd_formats.load_settings(
          os.path.join(
              os.path.dirname(os.path.dirname(__file__)),
              "testdata",
              "hf",
              "qwen2_untied",
          )
      )


if __name__ == "__main__":
  absltest.main()
