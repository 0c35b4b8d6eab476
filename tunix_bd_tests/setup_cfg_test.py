# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Packaging: setup.cfg lists every package, versions agree, entry points."""

import configparser
import importlib.metadata
import pathlib
import importlib
import re

from absl.testing import absltest

import tunix_bd

_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setup_cfg() -> configparser.ConfigParser:
  parser = configparser.ConfigParser()
  parser.read(_ROOT / "setup.cfg")
  return parser


class SetupCfgTest(absltest.TestCase):

  def test_every_subpackage_is_listed(self):
    listed = set(_setup_cfg()["options"]["packages"].split())
    found = {
        ".".join(p.parent.relative_to(_ROOT).parts)
        for p in (_ROOT / "tunix_bd").rglob("__init__.py")
    }
    self.assertEmpty(found - listed, "add these to setup.cfg's packages")
    self.assertIn("tunix_bd.configs", listed)
    self.assertTrue((_ROOT / "configs" / "__init__.py").exists())

  def test_versions_agree(self):
    metadata = _setup_cfg()["metadata"]
    self.assertEqual(metadata["version"], "attr: tunix_bd.__version__")
    changelog = (_ROOT / "CHANGELOG.md").read_text()
    first = re.search(r"^## \[(.+?)\]", changelog, re.M)
    self.assertEqual(first.group(1), "Unreleased")
    self.assertIn(f"`{tunix_bd.__version__}`", changelog.split("\n## [")[1])
    self.assertEqual(
        importlib.metadata.version("tunix-bd"), tunix_bd.__version__
    )

  def test_tunix_is_pinned_and_entry_points_are_declared(self):
    options = _setup_cfg()["options"]
    self.assertIn("google-tunix==0.1.7", options["install_requires"].split())
    entry_points = _setup_cfg()["options.entry_points"]
    self.assertIn(
        "tunix = tunix_bd.cli.main:run", entry_points["console_scripts"]
    )
    self.assertIn(
        "tunix_bd = tunix_bd.plugin:PLUGIN", entry_points["tunix.plugins"]
    )
    installed = importlib.metadata.entry_points(group="tunix.plugins")
    self.assertIn("tunix_bd", installed.names)

  def test_every_recipe_has_a_config_and_imports(self):
    from tunix_bd import plugin  # pylint: disable=g-import-not-at-top

    configs = {p.stem for p in plugin.PLUGIN.config_dir.glob("*.py")}
    for recipe, target in plugin.PLUGIN.recipes.items():
      self.assertIn(recipe, configs)
      module, _, function = target.partition(":")
      self.assertTrue(
          callable(getattr(importlib.import_module(module), function))
      )


if __name__ == "__main__":
  absltest.main()
