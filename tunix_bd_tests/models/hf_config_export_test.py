# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.hf_config_export: `config.json` and back."""

import json

from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
from tunix.models.qwen2 import model as qwen2_lib
from tunix_bd.models import hf_config as hf_config_lib
from tunix_bd.models import hf_config_export
from tunix_bd_tests.models import hf_tiny


class Qwen3ConfigToHfTest(parameterized.TestCase):

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
  def test_to_hf_then_from_hf_is_identity(self, overrides):
    config = hf_tiny.qwen3_config(**overrides)
    hf_config = hf_config_export.qwen3_config_to_hf(
        config, extra={"max_position_embeddings": 512}
    )
    self.assertEqual(hf_config["max_position_embeddings"], 512)
    self.assertEqual(
        hf_config_lib.qwen3_config_from_hf(
            json.loads(json.dumps(hf_config)),
            dtype=config.dtype,
            param_dtype=config.param_dtype,
        ),
        config,
    )

  def test_to_hf_rejects_unfaithful_configs(self):
    with self.assertRaisesRegex(ValueError, "rope_theta=10000"):
      hf_config_export.qwen3_config_to_hf(
          hf_tiny.qwen3_config(rope_theta=10000)
      )
    with self.assertRaisesRegex(ValueError, "'head_dim'"):
      hf_config_export.qwen3_config_to_hf(
          hf_tiny.qwen3_config(), extra={"head_dim": 64}
      )


class Qwen2ConfigToHfTest(parameterized.TestCase):

  def test_from_hf_then_to_hf_is_identity(self):
    config = hf_config_lib.model_config_from_hf(hf_tiny.qwen2_hf_config())
    self.assertIsInstance(config, qwen2_lib.ModelConfig)
    self.assertEqual(config.head_dim, 64 // 4)  # hidden_size // heads.
    self.assertEqual(config.rope_theta, 1_000_000)
    self.assertFalse(config.use_flash_attention)
    hf_config = hf_config_export.config_to_hf(config)
    self.assertEqual(hf_config["architectures"], ["Qwen2ForCausalLM"])
    self.assertEqual(hf_config_lib.model_config_from_hf(hf_config), config)


if __name__ == "__main__":
  absltest.main()
