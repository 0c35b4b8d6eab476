# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.hf_config (and the field checks it runs)."""

import json

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
      ("llama", {"model_type": "llama"}, "model_type='llama'"),
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
      ("theta_2507", {"rope_theta": 5000000.0}, "rope_theta=5000000.0"),
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
      ("llama", {"model_type": "llama"}, "model_type='llama'"),
  )
  def test_from_hf_rejects_what_tunix_qwen2_cannot_represent(
      self, changes, message
  ):
    with self.assertRaisesRegex(ValueError, message):
      hf_config_lib.model_config_from_hf(hf_tiny.qwen2_hf_config(**changes))


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
