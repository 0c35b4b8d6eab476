# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Self-consistency of the SDAR and Fast-dLLM v2 reference fixtures.

`testdata/bd_formats/` holds tiny checkpoints in the two formats and what
their own PyTorch code computed on them (`tools/bd_formats/make_fixtures.py`
regenerates both). These tests hold the fixtures to the formats' contracts
as docs/formats.md states them: the config and tokenizer fields, the weight
names and shapes, and rules of each reference decoder that its recorded
output must obey. Import and export tests build on them.
"""

import json
import os

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import safetensors.numpy as safetensors_np
import transformers

_DIR = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "testdata", "bd_formats"
)

_FORMATS = {
    "sdar_tiny": dict(
        architecture="SDARForCausalLM",
        model_type="sdar",
        auto_map={
            "AutoConfig": "configuration_sdar.SDARConfig",
            "AutoModel": "modeling_sdar.SDARModel",
            "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
        },
        block_key="block_size",
        mask_token="<|MASK|>",
        qk_norm=True,
        qkv_bias=False,
        runs=("greedy_tau0.9", "top1_verbatim"),
    ),
    "fast_dllm_v2_tiny": dict(
        architecture="Fast_dLLM_QwenForCausalLM",
        model_type="Fast_dLLM_Qwen",
        auto_map={
            "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
            "AutoModel": "modeling.Fast_dLLM_QwenModel",
            "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
        },
        block_key="bd_size",
        mask_token="|<MASK>|",
        qk_norm=False,
        qkv_bias=True,
        runs=(
            "generate_sb8",
            "generate_sb4",
            "generate_sb4_cache",
            "batch_sample_sb4",
        ),
    ),
}
_PARAMS = [dict(testcase_name=name, name=name) for name in _FORMATS]


def _load(name):
  path = os.path.join(_DIR, name)
  with open(os.path.join(path, "config.json")) as f:
    config = json.load(f)
  oracle = dict(np.load(os.path.join(path, "oracle.npz")))
  meta = json.loads(str(oracle.pop("meta")))
  return path, config, oracle, meta


def _generated_blocks(positions, steps, block):
  """{block index: [(position, step)]} for one row's generated slots."""
  blocks = {}
  for pos, step in zip(positions, steps):
    blocks.setdefault(pos // block, []).append((pos, step))
  return blocks


class FixtureFilesTest(parameterized.TestCase):

  @parameterized.named_parameters(*_PARAMS)
  def test_config_names_the_format(self, name):
    fmt = _FORMATS[name]
    _, config, _, meta = _load(name)
    self.assertEqual(config["architectures"], [fmt["architecture"]])
    self.assertEqual(config["model_type"], fmt["model_type"])
    self.assertEqual(config["auto_map"], fmt["auto_map"])
    self.assertEqual(config[fmt["block_key"]], meta["block_size"])
    if name == "sdar_tiny":
      self.assertEqual(config["mask_token_id"], meta["mask_id"])
    else:  # Fast-dLLM v2 keeps its mask id in code, not in config.json.
      self.assertNotIn("mask_token_id", config)
      self.assertNotIn("mask_id", config)

  @parameterized.named_parameters(*_PARAMS)
  def test_tokenizer_holds_the_mask_token(self, name):
    path, config, _, meta = _load(name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    mask = _FORMATS[name]["mask_token"]
    self.assertEqual(meta["mask_token"], mask)
    self.assertEqual(tokenizer.convert_tokens_to_ids(mask), meta["mask_id"])
    self.assertEqual(
        tokenizer(f"a{mask}b", add_special_tokens=False)["input_ids"][1],
        meta["mask_id"],
    )
    self.assertEqual(len(tokenizer), meta["mask_id"] + 1)
    self.assertLess(meta["mask_id"], config["vocab_size"])
    if name == "sdar_tiny":
      self.assertEqual(tokenizer.mask_token, mask)

  @parameterized.named_parameters(*_PARAMS)
  def test_weights_match_the_config(self, name):
    fmt = _FORMATS[name]
    path, config, _, _ = _load(name)
    weights = safetensors_np.load_file(os.path.join(path, "model.safetensors"))
    d, v = config["hidden_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", d // heads)
    expected = {
        "model.embed_tokens.weight": (v, d),
        "lm_head.weight": (v, d),
        "model.norm.weight": (d,),
    }
    for i in range(config["num_hidden_layers"]):
      p = f"model.layers.{i}."
      expected |= {
          p + "input_layernorm.weight": (d,),
          p + "post_attention_layernorm.weight": (d,),
          p + "self_attn.q_proj.weight": (heads * head_dim, d),
          p + "self_attn.k_proj.weight": (kv * head_dim, d),
          p + "self_attn.v_proj.weight": (kv * head_dim, d),
          p + "self_attn.o_proj.weight": (d, heads * head_dim),
          p + "mlp.gate_proj.weight": (config["intermediate_size"], d),
          p + "mlp.up_proj.weight": (config["intermediate_size"], d),
          p + "mlp.down_proj.weight": (d, config["intermediate_size"]),
      }
      if fmt["qk_norm"]:
        expected[p + "self_attn.q_norm.weight"] = (head_dim,)
        expected[p + "self_attn.k_norm.weight"] = (head_dim,)
      if fmt["qkv_bias"]:
        expected[p + "self_attn.q_proj.bias"] = (heads * head_dim,)
        expected[p + "self_attn.k_proj.bias"] = (kv * head_dim,)
        expected[p + "self_attn.v_proj.bias"] = (kv * head_dim,)
    self.assertEqual({k: w.shape for k, w in weights.items()}, expected)
    self.assertFalse(config["tie_word_embeddings"])
    self.assertTrue(all(w.dtype == np.float32 for w in weights.values()))

  @parameterized.named_parameters(*_PARAMS)
  def test_no_reference_code_is_committed(self, name):
    path, _, _, meta = _load(name)
    self.assertEqual([f for f in os.listdir(path) if f.endswith(".py")], [])
    self.assertTrue(meta["reference_files"])  # Their sha256s instead.


class OracleArraysTest(parameterized.TestCase):

  @parameterized.named_parameters(*_PARAMS)
  def test_logits_cover_every_position_and_id(self, name):
    _, config, oracle, _ = _load(name)
    rows, length = oracle["logits_tokens"].shape
    self.assertEqual(
        oracle["logits"].shape, (rows, length, config["vocab_size"])
    )
    self.assertEqual(oracle["logits"].dtype, np.float32)
    self.assertTrue(np.isfinite(oracle["logits"]).all())
    self.assertEqual(oracle["train_logits"].shape[-1], config["vocab_size"])
    self.assertTrue(np.isfinite(oracle["train_loss"]))

  @parameterized.named_parameters(*_PARAMS)
  def test_decode_runs_are_padded_token_rows(self, name):
    _, config, oracle, meta = _load(name)
    self.assertEqual(tuple(meta["runs"]), _FORMATS[name]["runs"])
    prompts, prompt_lens = (
        oracle["decode_prompts"],
        oracle["decode_prompt_lens"],
    )
    self.assertTrue((prompts[:, : prompt_lens.min()] >= 0).all())
    for run in meta["runs"]:
      tokens, lens = oracle[f"{run}_tokens"], oracle[f"{run}_lens"]
      self.assertLen(lens, len(prompt_lens))
      for row, n in zip(tokens, lens):
        self.assertTrue((row[n:] == -1).all(), run)
        self.assertTrue(
            ((row[:n] >= 0) & (row[:n] < config["vocab_size"])).all()
        )
        self.assertNotIn(meta["mask_id"], row[:n])
      self.assertTrue((oracle[f"{run}_forwards"] > 0).all())
      if f"{run}_min_margin" in oracle:  # No decision on a float knife edge.
        self.assertTrue((oracle[f"{run}_min_margin"] > 1e-5).all(), run)

  def test_sdar_blocks_commit_at_consecutive_steps(self):
    # low_confidence_dynamic with denoising_steps == block_length commits at
    # least one token per step, so a block's steps are 0..k with no gap.
    _, _, oracle, meta = _load("sdar_tiny")
    block = meta["block_size"]
    for run in meta["runs"]:
      for p_len, n, steps in zip(
          oracle["decode_prompt_lens"],
          oracle[f"{run}_lens"],
          oracle[f"{run}_steps"],
      ):
        positions = np.arange(p_len, p_len + n)
        self.assertEqual((p_len + n) % block, 0)  # Whole blocks.
        for slots in _generated_blocks(positions, steps[:n], block).values():
          used = sorted({s for _, s in slots})
          self.assertEqual(used, list(range(len(used))), run)
          self.assertLessEqual(used[-1], meta["denoising_steps"] - 1)
      if run == "top1_verbatim":  # Confidences are all 1: one step a block.
        self.assertTrue((oracle[f"{run}_steps"] <= 0).all())

  def test_fast_dllm_first_token_of_a_block_is_not_denoised(self):
    # generate commits each block's first token as the argmax of the
    # previous block's last logit (step -1); sub-blocks go left to right.
    _, _, oracle, meta = _load("fast_dllm_v2_tiny")
    block = meta["block_size"]
    for run, sub in (("generate_sb8", 8), ("generate_sb4", 4)):
      for p_len, n, steps in zip(
          oracle["decode_prompt_lens"],
          oracle[f"{run}_lens"],
          oracle[f"{run}_steps"],
      ):
        positions = np.arange(p_len, p_len + n)
        undenoised = positions[steps[:n] == -1]
        np.testing.assert_array_equal(undenoised % block, 0)
        if p_len % block:
          self.assertGreaterEqual(steps[0], 0)  # Inside the prompt's block.
        for slots in _generated_blocks(positions, steps[:n], block).values():
          by_sub = {}
          for pos, step in slots:
            if step >= 0:
              by_sub.setdefault(pos % block // sub, []).append(step)
          subs = [by_sub[k] for k in sorted(by_sub)]
          for before, after in zip(subs, subs[1:]):
            self.assertLess(max(before), min(after), run)

  def test_fast_dllm_generate_and_batch_sample_agree(self):
    # Same rule, two implementations: each batch row matches its solo
    # generate on their common length (the batch decodes extra blocks).
    _, _, oracle, _ = _load("fast_dllm_v2_tiny")
    solo, solo_lens = oracle["generate_sb4_tokens"], oracle["generate_sb4_lens"]
    batch, batch_lens = (
        oracle["batch_sample_sb4_tokens"],
        oracle["batch_sample_sb4_lens"],
    )
    for s, sn, b, bn in zip(solo, solo_lens, batch, batch_lens):
      n = min(sn, bn)
      self.assertGreater(n, 0)
      np.testing.assert_array_equal(s[:n], b[:n])


if __name__ == "__main__":
  absltest.main()
