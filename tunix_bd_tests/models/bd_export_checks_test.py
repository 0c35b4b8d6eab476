# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.bd_export: what each format refuses.

Also the reference code check, and that an export copies the code it
passes. The exports themselves, against the formats' own code, are
`bd_export_formats_test`.
"""

import dataclasses
import os
import types

from absl.testing import absltest
from absl.testing import parameterized
from tunix.models.qwen2 import model as qwen2_lib
from tunix_bd.models import bd_formats
from tunix_bd.models import bd_export
from tunix_bd_tests.models import bd_export_tiny

_SDAR, _FAST = bd_formats.SDAR, bd_formats.FAST_DLLM_V2


def _bd(alignment, block_size):
  return types.SimpleNamespace(alignment=alignment, block_size=block_size)


def _tiny_config(family):
  return bd_export_tiny.TINY[_SDAR if family == "qwen3" else _FAST].model_config


class CheckTest(parameterized.TestCase):

  def test_unknown_format(self):
    with self.assertRaisesRegex(ValueError, r"export.format='gguf'"):
      bd_export.check_format("gguf")

  @parameterized.named_parameters(
      (
          "sdar_shifted",
          _SDAR,
          "shifted",
          4,
          "qwen3",
          "<|mask|>",
          r"export.format='sdar'.*same_position.*bd.alignment=same_position",
      ),
      (
          "fast_same_position",
          _FAST,
          "same_position",
          8,
          "qwen2",
          "|<MASK>|",
          r"export.format='fast_dllm_v2'.*bd.alignment=shifted",
      ),
      (
          "sdar_qwen2",
          _SDAR,
          "same_position",
          4,
          "qwen2",
          "<|mask|>",
          r"Qwen3 layers without attention biases.*Tunix qwen2",
      ),
      (
          "fast_qwen3",
          _FAST,
          "shifted",
          8,
          "qwen3",
          "|<MASK>|",
          r"Qwen2 layers with q/k/v biases.*Tunix qwen3",
      ),
      (
          "fast_other_mask",
          _FAST,
          "shifted",
          8,
          "qwen2",
          "<|mask|>",
          r"bd.mask_token='\|<MASK>\|'",
      ),
      (
          "fast_mask_without_string",
          _FAST,
          "shifted",
          8,
          "qwen2",
          None,
          r"mask token is None",
      ),
      (
          "fast_block_64",
          _FAST,
          "shifted",
          64,
          "qwen2",
          "|<MASK>|",
          r"bd.block_size=64 does not divide 32",
      ),
      (
          "fast_block_12",
          _FAST,
          "shifted",
          12,
          "qwen2",
          "|<MASK>|",
          r"bd.block_size=12 does not divide 32",
      ),
  )
  def test_refused_naming_the_key_and_the_fix(
      self, fmt, alignment, block, family, mask_token, pattern
  ):
    with self.assertRaisesRegex(ValueError, pattern):
      bd_export.check_exportable(
          fmt, _bd(alignment, block), _tiny_config(family), mask_token
      )

  def test_sdar_refuses_moe(self):
    config = dataclasses.replace(
        _tiny_config("qwen3"), num_experts=4, num_experts_per_tok=2
    )
    with self.assertRaisesRegex(ValueError, "Tunix qwen3 MoE"):
      bd_export.check_exportable(_SDAR, _bd("same_position", 4), config, None)

  def test_what_the_formats_carry_passes(self):
    # SDAR carries any mask id (config.json's mask_token_id), also one
    # without a string; tunix_bd anything.
    bd_export.check_exportable(
        _SDAR, _bd("same_position", 16), _tiny_config("qwen3"), None
    )
    bd_export.check_exportable(
        "tunix_bd", _bd("shifted", 64), _tiny_config("qwen3"), None
    )
    self.assertIsInstance(_tiny_config("qwen2"), qwen2_lib.ModelConfig)

  def test_reference_code(self):
    tmp = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, "export.reference_code.*only"):
      bd_export.check_reference_code("tunix_bd", tmp)
    with self.assertRaisesRegex(
        ValueError, r"export.reference_code=.*lacks modeling.py, configura"
    ):
      bd_export.check_reference_code(_FAST, tmp)
    for name in ("modeling.py", "configuration.py"):
      with open(os.path.join(tmp, name), "w") as f:
        f.write("class Fast_dLLM_QwenConfig:\n  pass\n")
    with self.assertRaisesRegex(ValueError, "class Fast_dLLM_QwenModel"):
      bd_export.check_reference_code(_FAST, tmp)
    with open(os.path.join(tmp, "modeling.py"), "w") as f:
      f.write(
          "class Fast_dLLM_QwenModel:\n  pass\n"
          "class Fast_dLLM_QwenForCausalLM:\n  pass\n"
      )
    bd_export.check_reference_code(_FAST, tmp)
    out = os.path.join(self.create_tempdir().full_path, "export")
    bd_export_tiny.export(_FAST, out, reference_code=tmp)
    self.assertEqual(
        sorted(f for f in os.listdir(out) if f.endswith(".py")),
        ["configuration.py", "modeling.py"],
    )


if __name__ == "__main__":
  absltest.main()
