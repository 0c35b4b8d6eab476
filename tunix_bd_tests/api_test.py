# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.api: the declared public names, and how they go."""

import importlib
import re
import subprocess
import sys
import warnings

from absl.testing import absltest
from tunix_bd import api
from tunix_bd_tests import readme

# The public API, pinned: removing or renaming a name fails here first, and
# goes through `api._DEPRECATED` (a release of warnings naming the new one).
_PUBLIC = (
    "BlockDiffusionConfig",
    "DenoiseConfig",
    "Denoiser",
    "DiffusionGRPOLearner",
    "DiffusionOpdStrategy",
    "DiffusionRLCluster",
    "DiffusionRollout",
    "DiffusionSftTrainer",
    "Replayer",
    "ScratchModelSettings",
    "SftCorruptionConfig",
    "StudentRolloutSource",
    "TaskMix",
    "TextGenerator",
    "Trace",
    "build_char_tokenizer",
    "diffusion_grpo_loss",
    "diffusion_logits_fn",
    "diffusion_rows",
    "embedded_conversations",
    "exact_match",
    "final_answer",
    "load_model",
    "qwen3_config",
    "rebind_meshes",
    "sft_batches",
    "tokenize",
    "tunix_diffusion_batch_adapter",
    "tunix_diffusion_logits_fn",
)


class ApiTest(absltest.TestCase):

  def test_the_public_names_are_pinned_and_resolve(self):
    self.assertEqual(tuple(api.__all__), _PUBLIC)
    self.assertEqual(dir(api), list(_PUBLIC))
    for name in _PUBLIC:
      with self.subTest(name=name):
        value = getattr(api, name)
        module, attribute = api._PUBLIC[name].split(":")
        self.assertIs(
            value, getattr(importlib.import_module(module), attribute)
        )

  def test_importing_it_loads_no_rl_code(self):
    # Names resolve on first use; a fresh interpreter shows what the import
    # alone loads.
    code = (
        "import sys, tunix_bd.api;"
        "print(any(m.startswith(('tunix_bd.rl', 'tunix_bd.distillation'))"
        " for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    self.assertEqual(out.stdout.strip(), "False")

  def test_unknown_names_fail_and_deprecated_ones_warn_naming_the_new(self):
    with self.assertRaisesRegex(AttributeError, "no attribute 'Nope'"):
      api.Nope  # pylint: disable=pointless-statement
    api._DEPRECATED["OldDenoiser"] = "Denoiser"
    self.addCleanup(api._DEPRECATED.pop, "OldDenoiser")
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      self.assertIs(api.OldDenoiser, api.Denoiser)
    self.assertLen(caught, 1)
    self.assertIs(caught[0].category, DeprecationWarning)
    self.assertIn(
        "tunix_bd.api.OldDenoiser is deprecated; use tunix_bd.api.Denoiser",
        str(caught[0].message),
    )

  def test_the_readme_s_python_uses_the_public_api_alone(self):
    for section in ("Decoding from Python", "With Tunix's own diffusion API"):
      snippet = readme.python_snippet(section)
      imports = re.findall(r"^(?:from|import) (tunix_bd\S*)", snippet, re.M)
      self.assertEqual(imports, ["tunix_bd"], section)
      used = set(re.findall(r"\bapi\.(\w+)", snippet))
      self.assertNotEmpty(used)
      self.assertLessEqual(used, set(_PUBLIC), section)


if __name__ == "__main__":
  absltest.main()
