# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for configs/*.py: every variant loads and the stages fit together."""

import contextlib
import dataclasses
import importlib
import io
import json
import os
import pathlib
import re
import typing

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import plugin as benchmarks_plugin
from benchmarks.recipes import bench_opd
from benchmarks.recipes import bench_rl
from benchmarks.recipes import bench_sft
from tunix_bd import config_utils
from tunix_bd import plugin
from tunix_bd import recipes
from tunix_bd.cli import config_loading
from tunix_bd.data import dataset
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.recipes import ar_pretrain as ar_pretrain_recipe
from tunix_bd.recipes import compare as compare_recipe
from tunix_bd.recipes import generate as generate_recipe
from tunix_bd.recipes import opd as opd_recipe
from tunix_bd.recipes import sft as sft_recipe
from tunix_bd.models import sections
from tunix_bd.rl import settings as rl_settings
from tunix_bd.run import provenance
from tunix_bd.run import stage as stage_lib

# Config name -> the plugin that ships it and the command that launches it.
_PLUGINS = {
    p.stem: (owner.PLUGIN, launch)
    for owner, launch in (
        (plugin, "tunix run --plugin tunix_bd"),
        (benchmarks_plugin, "python -m benchmarks"),
    )
    for p in owner.PLUGIN.config_dir.glob("*.py")
    if not p.stem.startswith("_")
}
_CONFIG_NAMES = sorted(_PLUGINS)
# Configs with a `long` variant: the count task and a 256-token budget.
_LONG = ("ar_pretrain", "generate", "quickstart", "sft")
# Configs whose recipe renders chat prompts from its `data` section.
_CHAT = (
    "ar_pretrain",
    "bench_rl",
    "bench_sft",
    "generate",
    "grpo",
    "opd",
    "sft",
)


# Each recipe's config class (`run.stage.Stage`): its fields are the
# sections built from their settings dataclass (`config_utils.to_section`).
# The values are not restated here: the configs hold them, and the
# dataclasses hold the one default.
_CONFIG_CLASSES = {
    "ar_pretrain": ar_pretrain_recipe.ArPretrainConfig,
    "bench_opd": bench_opd.BenchOpdConfig,
    "bench_rl": bench_rl.BenchRlConfig,
    "bench_sft": bench_sft.BenchSftConfig,
    "compare": compare_recipe.CompareConfig,
    "generate": generate_recipe.GenerateConfig,
    "grpo": rl_settings.GrpoConfig,
    "opd": opd_recipe.OpdConfig,
    "sft": sft_recipe.SftConfig,
}
_TYPED_SECTIONS = {
    (name, section): hint
    for name, config_class in _CONFIG_CLASSES.items()
    for section, hint in typing.get_type_hints(config_class).items()
}


def _load(name, variant=None):
  return config_loading.load_config(
      _PLUGINS[name][0].config_dir / f"{name}.py", variant
  )


# Every recipe's and variant's printed config and built sections, as landed
# before the sections became types of their own (issue 49): a refactor of the
# settings must leave what users set and what runs fingerprint unchanged.
# Regenerate, after a deliberate change: TUNIX_BD_UPDATE_GOLDEN=1 pytest
# tunix_bd_tests/configs_test.py -k golden.
_GOLDEN = pathlib.Path(__file__).parent / "testdata" / "recipe_sections.json"


def _variants(path):
  """The variants `get_config` of config file `path` accepts."""
  source = path.read_text()
  listed = re.search(
      r"(?:_VARIANTS|variants) = \(([^)]*)\)", source
  ) or re.search(r"variant not in \(([^)]*)\)", source)
  return re.findall(r'"(\w+)"', listed.group(1))


def _section_values(settings):
  """`{field: [value repr | nested, resumable, source kind]}` of a section."""
  out = {}
  for f in dataclasses.fields(settings):
    value = getattr(settings, f.name)
    value = (
        _section_values(value)
        if dataclasses.is_dataclass(value)
        else repr(value)
    )
    out[f.name] = [
        value,
        bool(f.metadata.get(config_utils.RESUMABLE)),
        f.metadata.get(config_utils.SOURCE),
    ]
  return out


def _recipe_sections():
  """`{"config:variant": {"config": lines, "sections": ...}}` of every
  config tunix_bd ships."""
  snapshot = {}
  for name in _CONFIG_NAMES:
    owner = _PLUGINS[name][0]
    if owner is not plugin.PLUGIN:
      continue
    path = owner.config_dir / f"{name}.py"
    for variant in _variants(path):
      config = _load(name, None if variant == "default" else variant)
      package = owner.validators[config.recipe].partition(":")[0]
      recipe = importlib.import_module(f"{package}.{config.recipe}")
      with stage_lib.values_only(), contextlib.redirect_stdout(io.StringIO()):
        built = recipe.validate(config)
      sections_ = None
      if isinstance(built, stage_lib.Stage):
        sections_ = {
            f.name: _section_values(getattr(built.settings, f.name))
            for f in dataclasses.fields(built.settings)
        }
      snapshot[f"{name}:{variant}"] = {
          "config": list(config_loading.format_config(config)),
          "sections": sections_,
      }
  return snapshot


class ConfigsTest(parameterized.TestCase):

  def test_golden_every_recipe_s_config_and_sections_are_unchanged(self):
    snapshot = _recipe_sections()
    if os.environ.get("TUNIX_BD_UPDATE_GOLDEN"):
      _GOLDEN.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    golden = json.loads(_GOLDEN.read_text())
    self.assertEqual(sorted(snapshot), sorted(golden))
    for name, want in golden.items():
      with self.subTest(name):
        self.assertEqual(snapshot[name], want)

  @parameterized.parameters(*_CONFIG_NAMES)
  def test_default_and_tiny_load_and_name_their_launch(self, name):
    owner, launch = _PLUGINS[name]
    for variant in (None, "tiny"):
      config = _load(name, variant)
      self.assertIn(config.recipe, owner.recipes)
    source = (owner.config_dir / f"{name}.py").read_text()
    self.assertIn(f"{launch} {name}.py", source)

  @parameterized.parameters(
      *(n for n in _CONFIG_NAMES if _PLUGINS[n][0] is plugin.PLUGIN)
  )
  def test_dry_run_checks_every_recipe_and_variant_as_a_stage(self, name):
    for variant in _variants(plugin.PLUGIN.config_dir / f"{name}.py"):
      config = _load(name, None if variant == "default" else variant)
      self.assertIn(config.recipe, plugin.PLUGIN.validators, name)
      recipes.check_values(config)
      # Every key is a typed section's, top-level ones too (`Stage`).
      recipe = importlib.import_module(f"tunix_bd.recipes.{config.recipe}")
      with stage_lib.values_only(), contextlib.redirect_stdout(io.StringIO()):
        self.assertIsInstance(recipe.validate(config), stage_lib.Stage)

  def test_dry_run_validators_check_values_as_the_recipes_do(self):
    for owner in (plugin.PLUGIN, benchmarks_plugin.PLUGIN):
      for recipe, target in owner.validators.items():
        package = target.partition(":")[0]
        module = importlib.import_module(f"{package}.{recipe}")
        self.assertTrue(callable(module.validate))
    config = _load("sft", "tiny")
    config.workdir = "gs://never/looked/at"  # Nor the missing checkpoint.
    recipes.check_values(config)
    config.bd.block_size = -8
    with self.assertRaisesRegex(ValueError, r"^bd\.block_size must be >= 1"):
      recipes.check_values(config)

  @parameterized.parameters(*_CONFIG_NAMES)
  def test_unknown_variant_fails_naming_it(self, name):
    with self.assertRaisesRegex(ValueError, "'nope'"):
      _load(name, "nope")

  @parameterized.parameters(*_CHAT)
  def test_chat_recipes_have_the_template_keys(self, name):
    # Defaults: the tokenizer's own template, with its own thinking default.
    data = _load(name).data
    self.assertEqual(data.chat_template, "")
    self.assertIsNone(data.enable_thinking)

  def test_typed_sections_hold_every_field_and_build_their_dataclass(self):
    # One check per section: its keys are exactly its dataclass's fields
    # (none falls back to a hidden default), and its values build that
    # dataclass (every shipped value passes validation).
    for (name, section), settings in _TYPED_SECTIONS.items():
      with self.subTest(name=name, section=section):
        config = _load(name)
        fields = {f.name for f in dataclasses.fields(settings)}
        if getattr(settings, "SECTION", None) == "":  # Top-level keys.
          self.assertLessEqual(fields, set(config))
          values = {k: config[k] for k in fields}
        else:
          values = config[section].to_dict()
        self.assertEqual(set(values), fields)
        built = config_utils.from_section(settings, values, section)
        self.assertIsInstance(built, settings)
        # The built section round-trips: its fields rebuild it unchanged.
        again = {k: getattr(built, k) for k in fields}
        self.assertEqual(
            config_utils.from_section(settings, again, section), built
        )

  def test_every_recipes_model_is_a_class_of_its_own_keys(self):
    opd = config_utils.to_section(sections.OpdModel)
    for cls, other in (
        (sections.OpdModel, "checkpoint"),
        (sections.SftModel, "random_init"),
    ):
      with self.assertRaisesRegex(
          ValueError, rf"^unknown model config keys \['{other}'\]"
      ):
        config_utils.from_section(cls, {other: "x"}, "model")
    built = config_utils.from_section(sections.OpdModel, opd, "model")
    # OPD reads its student and teacher, never GRPO's policy.
    self.assertEqual(
        set(provenance.checkpoint_directories(built)), {"student", "teacher"}
    )
    built = config_utils.from_section(
        sections.SftModel, _load("sft").model, "model"
    )
    # SFT reads its AR checkpoint alone, the one its config names, and has
    # no KL reference (only GRPO's model copies its checkpoint there).
    self.assertEqual(
        provenance.checkpoint_directories(built),
        {"checkpoint": "runs/ar_pretrain/export"},
    )
    grpo = config_utils.from_section(
        sections.GrpoModel, _load("grpo").model, "model"
    )
    self.assertEqual(grpo.reference, grpo.checkpoint)

  @parameterized.parameters(*_LONG)
  def test_long_variants_use_the_count_task(self, name):
    config = _load(name, "long")
    tasks = config.tasks if name == "quickstart" else config.data.tasks
    self.assertEqual(tuple(tasks), ("count",))
    budget = {
        "quickstart": lambda c: c.max_new_tokens,
        "generate": lambda c: c.decode.max_new_tokens,
        "ar_pretrain": lambda c: c.eval.max_new_tokens,
    }
    if name in budget:  # A real long generation.
      self.assertGreaterEqual(budget[name](config), 256)

  @parameterized.parameters("ar_pretrain", "sft")
  def test_long_rows_fit_the_longest_count_answers(self, name):
    config = _load(name, "long")
    tokenizer = tokenizer_lib.build_char_tokenizer()
    mix = tasks_lib.TaskMix(tasks=("count",))
    longest = max(
        mix.examples("train", 300) + mix.examples("eval", 100),
        key=lambda e: len(e.answer),
    )
    self.assertEqual(longest.answer.count(",") + 1, tasks_lib.COUNT_MAX_TERMS)
    conversation = dataset.Conversation(longest.messages(), "count", "x")
    # Fails closed (a ValueError) if the row does not fit.
    rows = dataset.tokenize(tokenizer, [conversation], config.data.max_length)
    self.assertLen(rows, 1)

  def test_long_sft_converts_the_long_teacher(self):
    teacher = _load("ar_pretrain", "long")
    sft = _load("sft", "long")
    self.assertEqual(sft.model.checkpoint, f"{teacher.workdir}/export")
    # Shorter than a count term ("4749,"), so each masked digit's inputs
    # (the previous number's digits) are clean context.
    self.assertLess(sft.bd.block_size, len("4749,"))

  def test_block_size_curriculum_continues_each_stage_with_longer_blocks(self):
    previous = f"{_load('quickstart', 'long').workdir}/sft/export"
    previous_block = _load("sft", "long").bd.block_size
    for variant in ("long8", "long16"):
      stage = _load("sft", variant)
      self.assertEqual(stage.model.checkpoint, previous)
      self.assertEqual(stage.bd.block_size, 2 * previous_block)
      self.assertEqual(tuple(stage.data.tasks), ("count",))
      bench = _load("bench_decode").workload_settings[variant]
      self.assertEqual(bench.bd_checkpoint, f"{stage.workdir}/export")
      self.assertEqual(
          bench.ar_checkpoint,
          _load("bench_decode").workload_settings.long.ar_checkpoint,
      )
      previous, previous_block = f"{stage.workdir}/export", stage.bd.block_size

  def test_opd_distills_the_quickstarts_teacher_into_its_student(self):
    # The README's `opd.py` right after the quickstart needs no arguments.
    opd = _load("opd")
    quickstart = _load("quickstart").workdir
    self.assertEqual(opd.model.student, f"{quickstart}/sft/export")
    self.assertEqual(opd.model.teacher, f"{quickstart}/ar_pretrain/export")
    self.assertTrue(_load("opd", "smoke").model.random_init)

  def test_bench_decode_reads_the_quickstart_exports(self):
    bench = _load("bench_decode")
    self.assertEqual(tuple(bench.workloads), ("short", "long"))
    for name, variant in (("short", None), ("long", "long")):
      settings = bench.workload_settings[name]
      quickstart = _load("quickstart", variant)
      self.assertEqual(
          settings.ar_checkpoint, f"{quickstart.workdir}/ar_pretrain/export"
      )
      self.assertEqual(
          settings.bd_checkpoint, f"{quickstart.workdir}/sft/export"
      )
      self.assertEqual(tuple(settings.tasks), tuple(quickstart.tasks))
      self.assertEqual(settings.max_new_tokens, quickstart.max_new_tokens)
    # The long workload is a real long generation.
    self.assertGreaterEqual(bench.workload_settings.long.max_new_tokens, 256)


if __name__ == "__main__":
  absltest.main()
