# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The contract between the `tunix` host and the plugins it runs.

A plugin is an installed distribution that declares an entry point in the
`tunix.plugins` group, for example in its `setup.cfg`:

    [options.entry_points]
    tunix.plugins =
        my_plugin = my_plugin.plugin:PLUGIN

The entry point names a `Plugin` (or a zero-argument callable returning one).
Building it must stay cheap: recipes are named as strings and imported only
when `tunix run` calls them, so `tunix plugins` never imports heavy code.
"""

from collections.abc import Iterable, Mapping, Sequence
import dataclasses
import difflib
import importlib.metadata
import pathlib

ENTRY_POINT_GROUP = "tunix.plugins"


class UsageError(ValueError):
  """A mistake by the person launching `tunix`: the host prints `tunix:
  error: <message>` and exits with status 2, without a traceback."""


def did_you_mean(word: str, choices: Iterable[str], prefix: str = "") -> str:
  """`"; did you mean 'PREFIXc'?"` for the choice c nearest `word`, or "."."""
  close = difflib.get_close_matches(word, list(choices), n=1)
  return f"; did you mean {prefix + close[0]!r}?" if close else "."


@dataclasses.dataclass(frozen=True)
class Plugin:
  """What a plugin offers to the `tunix` host.

  Attributes:
    name: the plugin's name; must equal its entry-point name.
    version: the plugin's version, shown by `tunix plugins` and at launch.
    config_dir: directory of the plugin's configs: `*.py` files that define
      `get_config(arg=None)` returning an `ml_collections.ConfigDict`.
    recipes: recipe name -> `"package.module:function"`, called with the
      resolved `ConfigDict` of a config whose `recipe` key names it;
      imported only when run.
    registers: what the plugin registers, for `tunix plugins`: kind -> names,
      e.g. `{"loss hooks": ["bd_sft"]}`.
    description: one line shown by `tunix plugins`.
    process_setup: `"package.module:function"` the host calls, with no
      arguments, before the recipe is imported and Pathways starts (settings
      that must precede JAX's first backend). Empty: none.
    validators: recipe name -> `"package.module:function"` that checks a
      config's values without compute or writes (a ValueError naming the
      key); `--dry_run` calls it after printing the config.
  """

  name: str
  version: str
  config_dir: pathlib.Path
  recipes: Mapping[str, str]
  registers: Mapping[str, Sequence[str]] = dataclasses.field(
      default_factory=dict
  )
  description: str = ""
  process_setup: str = ""
  validators: Mapping[str, str] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if not isinstance(self.name, str) or not self.name:
      raise ValueError(f"Plugin.name must be a non-empty str: {self.name!r}")
    if not isinstance(self.version, str) or not self.version:
      raise ValueError(
          f"Plugin {self.name!r}: version must be a non-empty str, got"
          f" {self.version!r}"
      )
    if not isinstance(self.config_dir, (str, pathlib.PurePath)):
      raise ValueError(
          f"Plugin {self.name!r}: config_dir must be a path, got"
          f" {self.config_dir!r}"
      )
    # Frozen: normalise a str config_dir through object.__setattr__.
    object.__setattr__(self, "config_dir", pathlib.Path(self.config_dir))
    for field in ("recipes", "registers"):
      if not isinstance(getattr(self, field), Mapping):
        raise ValueError(
            f"Plugin {self.name!r}: {field} must be a mapping, got"
            f" {type(getattr(self, field)).__name__}"
        )
    for recipe, target in self.recipes.items():
      if not isinstance(recipe, str) or not recipe or not _is_target(target):
        raise ValueError(
            f"Plugin {self.name!r}: recipe {recipe!r} must map to"
            f" 'package.module:function', got {target!r}"
        )
    for recipe, target in dict(self.validators).items():
      if recipe not in self.recipes or not _is_target(target):
        raise ValueError(
            f"Plugin {self.name!r}: validators must map recipes to"
            f" 'package.module:function', got {recipe!r}: {target!r}"
        )
    if self.process_setup and not _is_target(self.process_setup):
      raise ValueError(
          f"Plugin {self.name!r}: process_setup must be"
          f" 'package.module:function', got {self.process_setup!r}"
      )
    for kind, names in self.registers.items():
      if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"Plugin {self.name!r}: registers[{kind!r}] must be a sequence of"
            f" names, got {names!r}"
        )
    if not isinstance(self.description, str):
      raise ValueError(
          f"Plugin {self.name!r}: description must be a str, got"
          f" {self.description!r}"
      )


def _is_target(target: object) -> bool:
  """Whether `target` reads `"package.module:function"`."""
  if not isinstance(target, str):
    return False
  module, _, function = target.partition(":")
  return bool(module and function)


def discover_plugins() -> dict[str, importlib.metadata.EntryPoint]:
  """Returns the installed plugins' entry points, by name, without loading."""
  entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
  return {ep.name: ep for ep in sorted(entry_points, key=lambda e: e.name)}


def load_plugin(name: str) -> Plugin:
  """Loads the installed plugin `name` (its `tunix.plugins` entry point);
  a UsageError if there is none, or it gives no `Plugin` named `name`."""
  installed = discover_plugins()
  if not installed:
    raise UsageError(
        f"unknown plugin {name!r}: no plugins are installed (plugins declare"
        f" an entry point in the {ENTRY_POINT_GROUP!r} group)"
    )
  if name not in installed:
    raise UsageError(
        f"unknown plugin {name!r}{did_you_mean(name, installed)}"
        f" Installed plugins: {', '.join(installed)}"
    )
  entry_point = installed[name]
  obj = entry_point.load()
  if not isinstance(obj, Plugin) and callable(obj):
    obj = obj()
  if not isinstance(obj, Plugin):
    raise UsageError(
        f"plugin {name!r}: entry point {entry_point.value!r} gave a"
        f" {type(obj).__name__}, expected a {__name__}.Plugin or a"
        " zero-argument callable returning one"
    )
  if obj.name != name:
    raise UsageError(
        f"plugin {name!r}: entry point {entry_point.value!r} gave a Plugin"
        f" named {obj.name!r}; the names must match"
    )
  return obj
