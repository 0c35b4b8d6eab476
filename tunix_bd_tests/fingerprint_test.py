# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.fingerprint: resuming fails closed on changed settings."""

import copy
import dataclasses
import hashlib
import json
import os
import re

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_utils
from tunix_bd import fingerprint
from tunix_bd import mesh
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import settings as distillation_settings
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import export
from tunix_bd.models import from_scratch
from tunix_bd.models import lora
from tunix_bd.models import sections
from tunix_bd.recipes import ar_pretrain
from tunix_bd.recipes import grpo
from tunix_bd.recipes import opd
from tunix_bd.recipes import sft
from tunix_bd.rl import settings as rl_settings
from tunix_bd.run import provenance
from tunix_bd.run import sources
from tunix_bd.sft import corruption
from tunix_bd.training import options
from tunix_bd_tests import test_common

_FIELDS = {
    "model": {"num_layers": 2, "embed_dim": 64, "name": "qwen3"},
    "block_size": 4,
    "stop_ids": (2, 0),
    "temperature": 0.5,
    "mask_token_id": 3,
    "seed": None,
    "shifted": True,
}


class DigestTest(parameterized.TestCase):

  def test_digest_matches_canonical_json_reference(self):
    result = fingerprint.fingerprint(_FIELDS)
    canonical = {
        "block_size": 4,
        "mask_token_id": 3,
        "model": {"embed_dim": 64, "name": "qwen3", "num_layers": 2},
        "seed": None,
        "shifted": True,
        "stop_ids": [2, 0],
        "temperature": 0.5,
    }
    self.assertEqual(result["fields"], canonical)
    self.assertEqual(list(result["fields"]), sorted(canonical))
    expected = hashlib.sha256(
        json.dumps(canonical, sort_keys=True).encode()
    ).hexdigest()
    self.assertEqual(result["digest"], expected)
    self.assertRegex(result["digest"], r"^[0-9a-f]{64}$")
    # What check and record write must survive a JSON round trip unchanged.
    self.assertEqual(json.loads(json.dumps(result)), result)

  def test_digest_is_stable_under_key_order_and_tuple_vs_list(self):
    reordered = {
        "shifted": True,
        "seed": None,
        "temperature": 0.5,
        "stop_ids": [2, 0],
        "mask_token_id": 3,
        "block_size": 4,
        "model": {"name": "qwen3", "embed_dim": 64, "num_layers": 2},
    }
    self.assertEqual(
        fingerprint.fingerprint(reordered), fingerprint.fingerprint(_FIELDS)
    )

  @parameterized.named_parameters(
      ("value", {"block_size": 8}),
      ("nested_value", {"model": {**_FIELDS["model"], "num_layers": 3}}),
      ("list_order", {"stop_ids": (0, 2)}),
      ("int_vs_string", {"block_size": "4"}),
      ("bool_vs_int", {"shifted": 1}),
      ("none_vs_zero", {"seed": 0}),
      ("new_field", {"canvas": "single"}),
  )
  def test_digest_changes_with_any_field(self, change):
    changed = {**_FIELDS, **change}
    self.assertNotEqual(
        fingerprint.fingerprint(changed)["digest"],
        fingerprint.fingerprint(_FIELDS)["digest"],
    )

  def test_non_json_values_are_canonicalized_by_repr(self):
    result = fingerprint.fingerprint({"dtype": complex(1, 2), "ids": {3: "x"}})
    self.assertEqual(result["fields"], {"dtype": "(1+2j)", "ids": {"3": "x"}})

  def test_differences_flattens_nested_fields(self):
    old = fingerprint.fingerprint(_FIELDS)
    new = fingerprint.fingerprint({
        **_FIELDS,
        "model": {**_FIELDS["model"], "num_layers": 4},
        "temperature": 1.0,
        "canvas": "single",
    })
    self.assertEqual(
        fingerprint.differences(old, new),
        {
            "canvas": (None, "single"),
            "model.num_layers": (2, 4),
            "temperature": (0.5, 1.0),
        },
    )
    self.assertEqual(fingerprint.differences(old, old), {})


class CheckOrRecordTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.current = fingerprint.fingerprint(_FIELDS)

  def test_records_new_run_then_accepts_the_same_fingerprint(self):
    checkpoints = os.path.join(self.root, "run", "checkpoints")
    test_common.check_or_record(checkpoints, self.current)
    path = os.path.join(checkpoints, fingerprint.FILE_NAME)
    with open(path, encoding="utf-8") as f:
      self.assertEqual(json.load(f), self.current)
    self.assertEqual(os.listdir(checkpoints), [fingerprint.FILE_NAME])
    os.mkdir(os.path.join(checkpoints, "100"))
    # Resuming with the same settings, in any key order, is accepted.
    test_common.check_or_record(checkpoints, self.current)
    reordered = fingerprint.fingerprint(dict(reversed(list(_FIELDS.items()))))
    test_common.check_or_record(checkpoints, reordered)

  def test_rejects_different_fingerprint_naming_each_field(self):
    test_common.check_or_record(self.root, self.current)
    path = os.path.join(self.root, fingerprint.FILE_NAME)
    with open(path, encoding="utf-8") as f:
      recorded_text = f.read()
    changed = fingerprint.fingerprint({
        **_FIELDS,
        "model": {**_FIELDS["model"], "num_layers": 4},
        "block_size": 8,
        "canvas": "clean_context",
    })
    with self.assertRaises(ValueError) as raised:
      test_common.check_or_record(self.root, changed)
    message = str(raised.exception)
    # A line saying what to do, then one line per field.
    self.assertEqual(
        message.splitlines(),
        [
            (
                f"cannot resume from {self.root}: its fingerprint differs in 3"
                " field(s). Use a new workdir or restore those settings:"
            ),
            "  block_size: checkpoint has 4, config has 8",
            "  canvas: checkpoint has None, config has 'clean_context'",
            "  model.num_layers: checkpoint has 2, config has 4",
        ],
    )
    # Unchanged fields are not reported.
    for unchanged in ("temperature", "stop_ids", "model.name", "seed"):
      self.assertNotRegex(message, re.escape(unchanged) + ": checkpoint")
    # The recorded fingerprint is kept, so the refusal repeats.
    with open(path, encoding="utf-8") as f:
      self.assertEqual(f.read(), recorded_text)
    with self.assertRaisesRegex(ValueError, "fingerprint differs"):
      test_common.check_or_record(self.root, changed)

  def test_another_recipes_checkpoints_are_refused_in_one_line(self):
    test_common.check_or_record(
        self.root, fingerprint.fingerprint({**_FIELDS, "recipe": "sft"})
    )
    grpo_run = {"recipe": "grpo", **{k: f"new {k}" for k in _FIELDS}}
    with self.assertRaisesRegex(
        ValueError,
        rf"^cannot resume from {re.escape(self.root)}: its checkpoints are"
        r" a 'sft' run's, this is 'grpo' \(\d+ other fields differ\)\. Use a"
        r" new workdir\.$",
    ):
      test_common.check_or_record(self.root, fingerprint.fingerprint(grpo_run))

  def test_an_empty_data_field_is_compared_like_any_other(self):
    digest = fingerprint.DIGEST_PREFIX + "0" * 64
    # An empty field (the embedded data) against a digest: the usual
    # field-by-field refusal.
    test_common.check_or_record(
        self.root, fingerprint.fingerprint({**_FIELDS, "data": {"train": ""}})
    )
    with self.assertRaisesRegex(ValueError, "data.train: checkpoint has ''"):
      test_common.check_or_record(
          self.root,
          fingerprint.fingerprint({**_FIELDS, "data": {"train": digest}}),
      )

  def test_refuses_checkpoints_without_fingerprint(self):
    os.mkdir(os.path.join(self.root, "2000"))
    with self.assertRaisesRegex(
        ValueError,
        re.escape(f"{self.root} holds checkpoints without a fingerprint.json"),
    ):
      test_common.check_or_record(self.root, self.current)
    self.assertFalse(
        os.path.exists(os.path.join(self.root, fingerprint.FILE_NAME))
    )

  def test_a_truncated_record_names_itself_and_the_fix(self):
    test_common.check_or_record(self.root, self.current)
    path = os.path.join(self.root, fingerprint.FILE_NAME)
    with open(path, "r+") as f:
      f.truncate(2)
    with self.assertRaisesRegex(
        ValueError, f"^{re.escape(path)} is not valid JSON .*use a new workdir"
    ):
      test_common.check_or_record(self.root, self.current)

  def test_non_step_entries_do_not_block_a_new_run(self):
    os.mkdir(os.path.join(self.root, "logs"))
    os.mkdir(os.path.join(self.root, "step_1"))
    test_common.check_or_record(self.root, self.current)
    self.assertCountEqual(
        os.listdir(self.root), ["logs", "step_1", fingerprint.FILE_NAME]
    )


class TokenizerDigestTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tokenizer = tokenizer_lib.build_char_tokenizer()
    self.digest = fingerprint.tokenizer_digest(self.tokenizer)

  def test_stable_across_builds_and_save_load(self):
    self.assertRegex(self.digest, r"^[0-9a-f]{16}$")
    rebuilt = tokenizer_lib.build_char_tokenizer()
    self.assertEqual(fingerprint.tokenizer_digest(rebuilt), self.digest)
    directory = self.create_tempdir().full_path
    self.tokenizer.save_pretrained(directory)
    loaded = tokenizer_lib.load_tokenizer(directory)
    self.assertEqual(fingerprint.tokenizer_digest(loaded), self.digest)

  def test_changes_when_vocab_changes(self):
    self.tokenizer.add_tokens(["<|tool|>"])
    self.assertNotEqual(
        fingerprint.tokenizer_digest(self.tokenizer), self.digest
    )

  def test_changes_when_chat_template_changes(self):
    self.tokenizer.chat_template = self.tokenizer.chat_template.replace(
        "<|im_start|>assistant\n", "<|im_start|>assistant\n<think>\n"
    )
    self.assertNotEqual(
        fingerprint.tokenizer_digest(self.tokenizer), self.digest
    )

  def test_changes_when_a_special_token_changes(self):
    self.tokenizer.pad_token = tokenizer_lib.UNK_TOKEN
    self.assertNotEqual(
        fingerprint.tokenizer_digest(self.tokenizer), self.digest
    )


# The one resume rule, as a table: the settings fields that may change when a
# run resumes. Every other field of these sections is fingerprinted.
_TRAIN = {
    "max_steps",
    "eval_every_n_steps",
    "checkpoint_every_n_steps",
    "checkpoints_to_keep",
}
_HELD_OUT = {
    "num_prompts",
    "thresholds",
    "sampled_samples",
    "sampled_threshold",
    "sampled_temperature",
    "batch_size",
    "seed",
}
_RESUMABLE = {
    options.Train: _TRAIN,
    options.TimedTrain: {*_TRAIN, "time_budget_s"},
    options.RlTrain: _TRAIN,
    rl_settings.GrpoSettings: {"verify_replay_every_n_steps"},
    generate_settings.DecodeSettings: set(),
    generate_settings.OpdRollout: set(),
    generate_settings.GrpoRollout: set(),
    rl_settings.RewardSettings: set(),
    options.Eval: {"batch_size"},
    options.ArEval: {"batch_size", "max_new_tokens"},
    options.DecodeEval: {"batch_size", "thresholds"},
    options.HeldOutEval: _HELD_OUT,
    distillation_settings.OpdSettings: set(),
    data_settings.Data: set(),
    data_settings.SftData: set(),
    data_settings.RlData: set(),
    data_settings.PromptData: set(),
    corruption.SftCorruptionConfig: set(),
    from_scratch.ScratchModelSettings: set(),
    from_scratch.ArModelSettings: {"remat"},
    sections.SftModel: {
        "remat",
        "logits_chunk",
        "sft_loss",
        "attention",
        "scan_layers",
    },
    sections.OpdModel: {"remat", "logits_chunk"},
    sections.GrpoModel: {"remat", "logits_chunk", "continued_sft"},
    sections.DecodeModel: {"remat"},
    sections.CompareModel: {"remat"},
    sections.Bd: set(),
    sections.ScratchBd: set(),
    lora.LoraSettings: set(),
    sections.ExportSettings: {"dtype", "format", "reference_code"},
    mesh.MeshSettings: {"fsdp", "tp"},
    mesh.RoleMeshSettings: {
        "fsdp",
        "tp",
        "data_sharding_axes",
        "disjoint",
        "actor",
        "reference",
        "rollout",
    },
    mesh.RoleSettings: {"devices", "slices", "fsdp", "tp"},
}


def _changed(value):
  """Valid-looking other values of a key, in order of preference."""
  if isinstance(value, bool):
    return [not value]
  if value is None:
    return [2, True]
  if isinstance(value, int):
    return [value * 2, value + 1] if value else [1]
  if isinstance(value, float):
    return [value * 2 if value else 0.5]
  return []  # Strings, tuples and nested sections: not varied here.


def _count_differences(a, b) -> int:
  flat = lambda c: fingerprint.fingerprint(c.to_dict())["fields"]
  return len(fingerprint.differences({"fields": flat(a)}, {"fields": flat(b)}))


def _resumable(settings, key):
  """Whether the table declares `key` of a section resumable."""
  parts = settings if isinstance(settings, tuple) else (settings,)
  for part in parts:
    if key in {f.name for f in dataclasses.fields(part)}:
      return key in _RESUMABLE[type(part)]
  raise KeyError(key)


class ResumeRuleTest(parameterized.TestCase):
  """The fingerprint rule is the fields' declaration, in every recipe."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = tokenizer_lib.build_char_tokenizer()
    cls.export = os.path.join(absltest.get_default_test_tmpdir(), "rule_ar")
    if not os.path.isdir(cls.export):
      export.save_checkpoint(
          test_common.tiny_qwen3(vocab_size=len(cls.tokenizer), seed=2),
          cls.export,
          tokenizer=cls.tokenizer,
      )

  def test_declared_resumable_fields_are_the_table(self):
    for settings, expected in _RESUMABLE.items():
      declared = {
          f.name
          for f in dataclasses.fields(settings)
          if f.metadata.get(config_utils.RESUMABLE)
      }
      self.assertEqual(declared, expected, settings.__name__)

  def test_sources_enter_by_content_and_nested_sections_by_the_rule(self):
    model = sections.GrpoModel(
        checkpoint=self.export, reference="", continued_sft=self.export
    )
    fields = provenance.section_fields(model, provenance.identify)
    self.assertEqual(
        fields["checkpoint"],
        provenance.identify(self.export).digest.parts(),
    )
    # No reference given: the KL reference is the policy, recorded so.
    self.assertEqual(model.reference, self.export)
    self.assertEqual(fields["reference"], fields["checkpoint"])
    # Resumable: left out; a nested section: its own fields.
    self.assertNotIn("continued_sft", fields)
    self.assertNotIn("remat", fields)
    self.assertEqual(
        fields["scratch"],
        dataclasses.asdict(from_scratch.ScratchModelSettings()),
    )
    # A random model reads no checkpoint.
    random = sections.GrpoModel(random_init=True, reference="")
    random_fields = provenance.section_fields(random, provenance.identify)
    self.assertIsNone(random_fields["checkpoint"])
    self.assertIsNone(random_fields["reference"])  # A copy of the policy.

  def _fingerprint(self, recipe, config):
    """`(stage, fingerprint)` as the recipe's `run` computes them."""
    if recipe in ("sft", "ar_pretrain"):
      module = sft if recipe == "sft" else ar_pretrain
      stage = module.validate(config)
      digest = fingerprint.tokenizer_digest(self.tokenizer)
      return stage, stage.check_fingerprint(tokenizer=digest)
    if recipe == "opd":
      stage = opd.validate(config)
      return stage, opd.check_fingerprint(stage, *opd.read_sources(stage))
    stage = grpo.validate(config)
    policy = sources.read_converted(stage, "checkpoint", stage.settings.rollout)
    return stage, grpo.check_fingerprint(stage, policy)

  @parameterized.parameters(
      ("sft", "tiny"),
      ("ar_pretrain", "tiny"),
      ("opd", "smoke"),
      ("grpo", "smoke"),
  )
  def test_a_key_may_change_on_resume_iff_declared_resumable(
      self, recipe, variant
  ):
    config = config_loading.load_config(
        plugin.PLUGIN.config_dir / f"{recipe}.py", variant
    )
    config.workdir = os.path.join(self.create_tempdir().full_path, "run")
    if recipe == "sft":
      config.model.checkpoint = self.export
    stage, base = self._fingerprint(recipe, config)
    checked = set()
    for field in dataclasses.fields(stage.settings):
      name, settings = field.name, getattr(stage.settings, field.name)
      for key, value in config[name].items():
        for other in _changed(value):
          changed = copy.deepcopy(config)
          try:
            changed[name][key] = other
            if _count_differences(changed, config) > 1:
              continue  # Another key follows this one (a FieldReference).
            _, current = self._fingerprint(recipe, changed)
          except (ValueError, TypeError):
            continue  # Not a valid value of this key here; try the next.
          differs = bool(fingerprint.differences(base, current))
          self.assertEqual(
              differs,
              not _resumable(settings, key),
              f"{recipe}: {name}.{key}",
          )
          checked.add(f"{name}.{key}")
          break
    # Every key of the common rule was exercised in this recipe.
    self.assertContainsSubset(
        {
            "train.batch_size",
            "train.learning_rate",
            "train.max_steps",
            "train.eval_every_n_steps",
            "data.num_train",
        },
        checked,
    )
    if recipe == "grpo":  # The role-mesh section, typed like the others.
      self.assertContainsSubset({"mesh.tp", "mesh.disjoint"}, checked)


if __name__ == "__main__":
  absltest.main()
