# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Packaging: setup.cfg lists every package, versions agree, entry points."""

import configparser
import importlib.metadata
import pathlib
import importlib
import re
import sys

from absl.testing import absltest
from packaging import requirements
from packaging import utils

import tunix_bd

_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setup_cfg() -> configparser.ConfigParser:
  parser = configparser.ConfigParser()
  parser.read(_ROOT / "setup.cfg")
  return parser


def _requirements() -> dict[str, requirements.Requirement]:
  """install_requires by canonical name."""
  lines = _setup_cfg()["options"]["install_requires"].split("\n")
  reqs = [requirements.Requirement(line) for line in lines if line.strip()]
  return {utils.canonicalize_name(r.name): r for r in reqs}


def _constraints() -> dict[str, str]:
  """constraints.txt: canonical name to its exact version."""
  pins = {}
  text = (_ROOT / "constraints.txt").read_text()
  for line in text.splitlines():
    line = line.split("#")[0].strip()
    if line:
      name, _, version = line.partition("==")
      pins[utils.canonicalize_name(name)] = version
  return pins


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

  def test_requirements_are_ranges_that_admit_the_constraints(self):
    pins = _constraints()
    for section, key in (
        ("options", "install_requires"),
        ("options.extras_require", "pathways"),
        ("options.extras_require", "gpu"),
    ):
      for line in _setup_cfg()[section][key].split("\n"):
        if not line.strip():
          continue
        req = requirements.Requirement(line)
        self.assertNotIn("==", str(req.specifier), f"{line}: a range")
        self.assertTrue(
            any(s.operator in ("<", "<=", "~=") for s in req.specifier),
            f"{line}: needs an upper bound",
        )
        name = utils.canonicalize_name(req.name)
        self.assertIn(name, pins, f"{line}: pin it in constraints.txt")
        self.assertIn(pins[name], req.specifier, f"{line}: constraints.txt")

  def test_every_supported_tunix_is_in_the_range(self):
    from tunix_bd import compat  # pylint: disable=g-import-not-at-top

    tunix = _requirements()["google-tunix"]
    self.assertEqual(_constraints()["google-tunix"], "0.1.7")
    for version in compat.PRIVATE_SURFACE_SHA256:
      self.assertTrue(
          tunix.specifier.contains(version, prereleases=True), version
      )

  def test_installed_versions_lie_in_the_ranges(self):
    for name, req in _requirements().items():
      installed = importlib.metadata.version(name)
      self.assertTrue(
          req.specifier.contains(installed, prereleases=True),
          f"{name} {installed} is outside {req}",
      )

  def test_entry_points_are_declared(self):
    entry_points = _setup_cfg()["options.entry_points"]
    self.assertIn(
        "tunix = tunix_bd.cli.main:run", entry_points["console_scripts"]
    )
    self.assertIn(
        "tunix_bd = tunix_bd.plugin:PLUGIN", entry_points["tunix.plugins"]
    )
    installed = importlib.metadata.entry_points(group="tunix.plugins")
    self.assertIn("tunix_bd", installed.names)

  def test_the_installed_tunix_command_is_this_host(self):
    # google-tunix ships no `tunix` script today; if it (or anything) does,
    # two distributions would race for the same file in bin/.
    scripts = [
        ep
        for ep in importlib.metadata.entry_points(group="console_scripts")
        if ep.name == "tunix"
    ]
    self.assertLen(scripts, 1, [ep.dist.name for ep in scripts])
    self.assertEqual(scripts[0].value, "tunix_bd.cli.main:run")
    self.assertEqual(utils.canonicalize_name(scripts[0].dist.name), "tunix-bd")
    script = pathlib.Path(sys.executable).parent / "tunix"
    if script.exists():  # The environment's own bin/, when installed there.
      self.assertIn("tunix_bd.cli.main", script.read_text())

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
