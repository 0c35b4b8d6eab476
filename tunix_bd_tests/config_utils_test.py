# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for config_utils: the contract every config section keeps.

A section is a frozen dataclass whose fields are its keys: `to_section`
writes each default once, `from_section` builds it back (an unknown key
fails, nested sections from their sub-mappings), its checks name keys under
its `SECTION`, and the fingerprint reads the fields' `resumable`/`source`
declarations.
"""

import dataclasses
import hashlib
import os
import re
from typing import ClassVar

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_utils
from tunix_bd.models import from_scratch
from tunix_bd.models import sections
from tunix_bd.rl import settings as rl_settings
from tunix_bd.run import provenance
from tunix_bd.training import options


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Section:
  SECTION: ClassVar[str] = "toy"

  steps: int = config_utils.resumable(default=3)
  data: str = config_utils.source(config_utils.FILE)
  rate: float = 0.5


class ConfigUtilsTest(parameterized.TestCase):

  def test_unknown_keys_fail_naming_the_section_and_its_keys(self):
    with self.assertRaisesRegex(
        ValueError,
        r"^unknown eval config keys \['thresholds'\]; valid keys are"
        r" \['batch_size'\]\.$",
    ):
      config_utils.from_section(options.Eval, {"thresholds": (0.5,)}, "eval")
    with self.assertRaisesRegex(ValueError, r"the eval config must be a"):
      config_utils.from_section(options.Eval, 3, "eval")

  def test_to_section_writes_each_default_once(self):
    section = config_utils.to_section(options.TimedTrain, batch_size=4)
    self.assertEqual(
        set(section), {f.name for f in dataclasses.fields(options.TimedTrain)}
    )
    built = config_utils.from_section(options.TimedTrain, section, "train")
    self.assertEqual(built, options.TimedTrain(batch_size=4))
    # A subclass holds its base's keys and its own, nothing else.
    self.assertEqual(
        set(config_utils.to_section(options.RlTrain))
        - set(config_utils.to_section(options.Train)),
        {"mini_batch_size", "train_micro_batch_size"},
    )

  def test_to_section_refuses_unknown_fields_and_missing_required_ones(self):
    with self.assertRaisesRegex(ValueError, r"no fields \['betta'\]"):
      config_utils.to_section(rl_settings.GrpoSettings, betta=0.1)

    @dataclasses.dataclass(frozen=True)
    class Required:
      batch_size: int

    with self.assertRaisesRegex(ValueError, "batch_size has no default"):
      config_utils.to_section(Required)

  def test_optional_defaults_take_typed_overrides(self):
    section = config_utils.to_section(rl_settings.GrpoSettings)
    self.assertIsNone(section.epsilon_high)
    section.epsilon_high = 0.28
    with self.assertRaises(TypeError):
      section.epsilon_high = "high"

  def test_nested_sections_build_from_their_sub_mappings(self):
    section = config_utils.to_section(sections.GrpoModel, random_init=True)
    self.assertEqual(
        set(section.scratch_bd), {"block_size", "alignment", "layout"}
    )
    section.scratch.num_layers = 1
    section.scratch_bd.block_size = 4
    built = config_utils.from_section(sections.GrpoModel, section, "model")
    self.assertEqual(built.scratch.num_layers, 1)
    self.assertEqual(built.scratch_bd, sections.ScratchBd(block_size=4))
    # A nested section's unknown key names it: a random model's tokenizer
    # has its mask token.
    with self.assertRaisesRegex(
        ValueError,
        r"^unknown model.scratch_bd config keys \['mask_token'\]; valid keys"
        r" are \['block_size', 'alignment', 'layout'\]\.$",
    ):
      config_utils.from_section(
          sections.GrpoModel, {"scratch_bd": {"mask_token": "<m>"}}, "model"
      )

  @parameterized.parameters(
      (sections.Bd, {"block_size": 0}, "bd.block_size"),
      (sections.ScratchBd, {"block_size": 0}, "model.scratch_bd.block_size"),
      (
          from_scratch.ScratchModelSettings,
          {"num_layers": 0},
          "model.scratch.num_layers",
      ),
      (from_scratch.ArModelSettings, {"num_layers": 0}, "model.num_layers"),
      (options.HeldOutEval, {"seed": -1}, "eval.seed"),
  )
  def test_checks_name_keys_under_the_class_s_section(self, cls, values, key):
    with self.assertRaisesRegex(ValueError, rf"^{re.escape(key)} must be"):
      config_utils.from_section(cls, values, cls.SECTION)
    # Built directly, the same name.
    with self.assertRaisesRegex(ValueError, rf"^{re.escape(key)} must be"):
      cls(**values)
    # Nested, likewise.
    if cls is sections.ScratchBd:
      with self.assertRaisesRegex(ValueError, rf"^{re.escape(key)} must be"):
        config_utils.from_section(
            sections.OpdModel, {"scratch_bd": values}, "model"
        )

  def test_the_fingerprint_reads_the_fields_declarations(self):
    path = os.path.join(self.create_tempdir().full_path, "a.jsonl")
    with open(path, "w") as f:
      f.write("{}\n")
    built = config_utils.from_section(
        _Section, {"steps": 7, "data": path}, "toy"
    )
    fields = provenance.section_fields(built, provenance.identify)
    digest = hashlib.sha256(b"{}\n").hexdigest()
    # Resumable: left out; a source: its content, never its path.
    self.assertEqual(fields, {"data": f"sha256:{digest}", "rate": 0.5})
    with self.assertRaisesRegex(ValueError, "source kind must be"):
      config_utils.source("url")


if __name__ == "__main__":
  absltest.main()
