# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.hf_config (and the field checks it runs)."""

import json
import os

from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
from tunix.models.qwen2 import model as qwen2_lib
from tunix_bd.models import hf_config as hf_config_lib
from tunix_bd_tests.models import hf_tiny


class ConfigTest(parameterized.TestCase):

  def test_transformers_v5_rope_parameters_and_null_kv_heads(self):
    hf_config = hf_tiny.qwen3_hf_config(tied=False, kv_heads=1)
    del hf_config["rope_theta"], hf_config["rope_scaling"]
    hf_config["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}
    hf_config["num_key_value_heads"] = None
    config = hf_config_lib.model_config_from_hf(hf_config)
    self.assertEqual(config.rope_theta, 1_000_000)
    self.assertEqual(config.num_kv_heads, hf_tiny.HEADS)
    self.assertFalse(config.use_flash_attention)

  @parameterized.named_parameters(
      ("mistral", {"model_type": "mistral"}, "model_type='mistral'"),
      (
          "classifier",
          {"architectures": ["Qwen3ForSequenceClassification"]},
          "architectures",
      ),
      (
          "yarn",
          {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
          "rope_scaling",
      ),
      ("theta", {"rope_theta": 10000.0}, "rope_theta=10000.0"),
      (
          "theta_2507",
          {"rope_theta": 5000000.0},
          r"rope_theta=5000000.0 is not supported: Tunix Qwen3 always applies"
          r" RoPE with theta 1000000 \(its attention ignores",
      ),
      ("bias", {"attention_bias": True}, "attention_bias"),
      ("sliding", {"use_sliding_window": True}, "use_sliding_window"),
      ("act", {"hidden_act": "gelu"}, "hidden_act"),
      ("moe_in_dense", {"num_experts": 8}, "num_experts"),
      ("missing", {"num_hidden_layers": None}, "'num_hidden_layers'"),
      ("bad_int", {"vocab_size": 12.5}, "vocab_size"),
      ("no_head_dim", {"head_dim": None}, "head_dim"),
      (
          "moe_no_norm",
          {
              "model_type": "qwen3_moe",
              "architectures": ["Qwen3MoeForCausalLM"],
              "num_experts": 4,
              "num_experts_per_tok": 2,
              "moe_intermediate_size": 32,
          },
          "norm_topk_prob",
      ),
  )
  def test_from_hf_rejects(self, changes, message):
    hf_config = hf_tiny.qwen3_hf_config(tied=False, kv_heads=1)
    hf_config.update(changes)
    with self.assertRaisesRegex(ValueError, message):
      hf_config_lib.model_config_from_hf(hf_config)


class Qwen2ConfigTest(parameterized.TestCase):

  def test_qwen25_layout_and_its_own_theta(self):
    # Qwen2.5 ships a window size with the window off; Tunix's Qwen2
    # rotates with the config's theta (DeepSeek-R1-Distill-Qwen: 1e4).
    config = hf_config_lib.model_config_from_hf(
        hf_tiny.qwen2_hf_config(
            sliding_window=32768,
            max_window_layers=21,
            layer_types=None,
            rope_parameters=None,
            rope_theta=10000.0,
        )
    )
    self.assertEqual(config.rope_theta, 10000)

  @parameterized.named_parameters(
      ("window_on", {"use_sliding_window": True}, "use_sliding_window"),
      (
          "sliding_layer",
          {"layer_types": ["full_attention", "sliding_attention"]},
          "layer_types",
      ),
      (
          "yarn",
          {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
          "rope_scaling has rope_type 'yarn'; Tunix Qwen2",
      ),
      (
          "scaled_default",
          {"rope_parameters": {"rope_type": "default", "factor": 2.0}},
          "rope_parameters has unsupported keys",
      ),
      ("act", {"hidden_act": "gelu"}, "hidden_act='gelu' is not supported"),
      (
          "architecture",
          {"architectures": ["Qwen3ForCausalLM"]},
          "architectures",
      ),
      ("no_kv_heads", {"num_key_value_heads": 3}, "not a multiple"),
      ("llama", {"model_type": "llama"}, "for model_type 'llama'"),
  )
  def test_from_hf_rejects_what_tunix_qwen2_cannot_represent(
      self, changes, message
  ):
    with self.assertRaisesRegex(ValueError, message):
      hf_config_lib.model_config_from_hf(hf_tiny.qwen2_hf_config(**changes))


def _llama_hf_config(**changes) -> dict:
  """The `config.json` transformers wrote for a tiny Llama 3.2 (theta 5e5,
  tied; testdata/hf/llama_tied_theta5e5), with `changes`."""
  path = os.path.join(
      os.path.dirname(os.path.dirname(__file__)),
      "testdata/hf/llama_tied_theta5e5/config.json",
  )
  with open(path) as f:
    return {**json.load(f), **changes}


class LlamaConfigTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("llama3p2", {}, 500_000),
      # Legacy keys (transformers 4, as Llama 3 8B ships them); TinyLlama's
      # theta 1e4.
      (
          "legacy",
          {"rope_parameters": None, "rope_theta": 1e4, "rope_scaling": None},
          10_000,
      ),
  )
  def test_a_llama_is_a_qwen2_at_its_own_theta(self, changes, theta):
    config = hf_config_lib.model_config_from_hf(_llama_hf_config(**changes))
    self.assertIsInstance(config, qwen2_lib.ModelConfig)
    self.assertEqual(config.rope_theta, theta)
    self.assertEqual((config.head_dim, config.num_kv_heads), (16, 2))
    self.assertTrue(config.use_tied_embedding)
    # Its export's config.json describes the same model, as Qwen2.
    as_qwen2 = hf_config_lib.llama_as_qwen2(_llama_hf_config(**changes))
    self.assertEqual(as_qwen2["architectures"], ["Qwen2ForCausalLM"])
    self.assertNotIn("attention_bias", as_qwen2)
    self.assertEqual(hf_config_lib.model_config_from_hf(as_qwen2), config)

  @parameterized.named_parameters(
      (
          "llama3_scaling",  # Llama 3.1 and later.
          {
              "rope_parameters": {
                  "rope_type": "llama3",
                  "rope_theta": 5e5,
                  "factor": 32.0,
                  "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192,
              }
          },
          r"rope_parameters has rope_type 'llama3'; Tunix Llama \(as Qwen2\)"
          " only implements the default RoPE",
      ),
      (
          "o_bias",
          {"attention_bias": True},
          r"attention_bias=True is not supported by Tunix Llama \(as Qwen2\):"
          r" it has no o_proj bias",
      ),
      ("mlp_bias", {"mlp_bias": True}, "mlp_bias=True"),
      (
          "architecture",
          {"architectures": ["LlamaForSequenceClassification"]},
          "architectures",
      ),
      ("no_theta", {"rope_parameters": None}, "'rope_theta'"),
  )
  def test_from_hf_rejects_what_tunix_cannot_run_of_a_llama(
      self, changes, message
  ):
    with self.assertRaisesRegex(ValueError, message):
      hf_config_lib.model_config_from_hf(_llama_hf_config(**changes))


class ConfigToHfTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("dense_untied", {}),
      (
          "dense_tied_bf16",
          dict(
              use_tied_embedding=True,
              dtype=jnp.bfloat16,
              param_dtype=jnp.bfloat16,
          ),
      ),
      ("moe", dict(num_experts=8, num_experts_per_tok=2, hidden_dim=32)),
  )
  def test_qwen3_to_hf_then_from_hf_is_identity(self, overrides):
    config = hf_tiny.qwen3_config(**overrides)
    self.assertEqual(
        hf_config_lib.model_config_from_hf(
            json.loads(json.dumps(hf_config_lib.config_to_hf(config))),
            dtype=config.dtype,
            param_dtype=config.param_dtype,
        ),
        config,
    )

  def test_to_hf_rejects_unfaithful_configs(self):
    with self.assertRaisesRegex(ValueError, "rope_theta=10000"):
      hf_config_lib.config_to_hf(hf_tiny.qwen3_config(rope_theta=10000))

  def test_qwen2_from_hf_then_to_hf_is_identity(self):
    config = hf_config_lib.model_config_from_hf(hf_tiny.qwen2_hf_config())
    self.assertIsInstance(config, qwen2_lib.ModelConfig)
    self.assertEqual(config.head_dim, 64 // 4)  # hidden_size // heads.
    self.assertEqual(config.rope_theta, 1_000_000)
    self.assertFalse(config.use_flash_attention)
    hf_config = hf_config_lib.config_to_hf(config)
    self.assertEqual(hf_config["architectures"], ["Qwen2ForCausalLM"])
    self.assertEqual(hf_config_lib.model_config_from_hf(hf_config), config)


if __name__ == "__main__":
  absltest.main()
