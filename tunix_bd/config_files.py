# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The configs tunix_bd ships (`configs/*.py`), found and imported by path.

An installed distribution ships them as `tunix_bd.configs`, a source
checkout at its top level, where that import fails; by path works in both,
as the `tunix` host loads any plugin's configs.
"""

from __future__ import annotations

import importlib.util
import itertools
import pathlib
import re
import sys
import types

import ml_collections

import tunix_bd

_module_ids = itertools.count()


def config_dir() -> pathlib.Path:
  """The directory of tunix_bd's own config files."""
  package = pathlib.Path(tunix_bd.__file__).parent
  installed = package / "configs"
  return installed if installed.is_dir() else package.parent / "configs"


def import_file(path: pathlib.Path) -> types.ModuleType:
  """Imports a Python file as a module of its own, under a unique name."""
  # A unique name per load, so two configs named alike never clash.
  stem = re.sub(r"\W", "_", path.stem)
  name = f"_tunix_config_{next(_module_ids)}_{stem}"
  spec = importlib.util.spec_from_file_location(name, path)
  if spec is None or spec.loader is None:
    raise ValueError(f"cannot load config file {str(path)!r}")
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # Dataclasses in configs look it up.
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[name]
    raise
  return module


def get_config(name: str, arg: str | None = None) -> ml_collections.ConfigDict:
  """`get_config(arg)` of tunix_bd's config `name` (e.g. "sft"), unlocked."""
  module = import_file(config_dir() / f"{name}.py")
  return module.get_config() if arg is None else module.get_config(arg)
