# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Finds, loads and overrides the `CONFIG[:ARG]` of `tunix run`.

A config is a `.py` file defining `get_config(arg=None)` that returns an
`ml_collections.ConfigDict`; docs/recipes.md, "The `tunix` command". Every
mistake raises `plugin_api.UsageError` before anything runs.
"""

import ast
from collections.abc import Sequence
import inspect
import pathlib
from typing import Any, NamedTuple

import ml_collections

from tunix_bd import config_files
from tunix_bd.cli import plugin_api

OVERRIDE_PREFIX = "--config."
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
_NOT_A_LITERAL = object()


class Override(NamedTuple):
  """One `--config.KEY=VALUE`: `value` as typed (`split_override_args`), or
  parsed to the field's type (`apply_overrides`)."""

  key: str
  value: Any


def split_override_args(
    argv: Sequence[str],
) -> tuple[list[Override], list[str]]:
  """`(overrides in order, other arguments)`: takes `--config.KEY=VALUE` and
  `--config.KEY VALUE` out of `argv`."""
  overrides, rest = [], []
  args = iter(argv)
  for arg in args:
    if not arg.startswith(OVERRIDE_PREFIX):
      rest.append(arg)
      continue
    key, sep, value = arg[len(OVERRIDE_PREFIX) :].partition("=")
    if not sep:
      value = next(args, None)
      if value is None:
        raise plugin_api.UsageError(
            f"{arg} has no value: write {arg}=VALUE or {arg} VALUE"
        )
    if not key or any(not part for part in key.split(".")):
      raise plugin_api.UsageError(f"malformed override {arg!r}: no key")
    overrides.append(Override(key, value))
  return overrides, rest


def available_configs(config_dir: pathlib.Path) -> dict[str, pathlib.Path]:
  """Returns the configs in `config_dir` by file stem, skipping `_*` files."""
  if not config_dir.is_dir():
    return {}
  return {
      path.stem: path
      for path in sorted(config_dir.glob("*.py"))
      if not path.name.startswith("_")
  }


def config_summary(path: pathlib.Path) -> str:
  """The first line of a config's module docstring, read without importing."""
  try:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
  except (OSError, SyntaxError, ValueError):
    return ""
  return docstring.strip().splitlines()[0] if docstring else ""


def resolve_config(
    spec: str, plugin: plugin_api.Plugin
) -> tuple[pathlib.Path, str | None]:
  """`(absolute path, ARG or None)` of `CONFIG[:ARG]`: `CONFIG` tried as a
  path, then as a name in `plugin.config_dir`; `.py` is optional."""
  name, sep, arg = spec.partition(":")
  if not name:
    raise plugin_api.UsageError(f"config {spec!r} has no file name before ':'")
  if sep and not arg:
    raise plugin_api.UsageError(
        f"config {spec!r} has an empty ARG after ':'; drop the ':' or give"
        " an ARG"
    )
  relative = pathlib.Path(name if name.endswith(".py") else name + ".py")
  as_path = pathlib.Path.cwd() / relative  # `relative` if it is absolute.
  for path in (as_path, plugin.config_dir / relative):
    if path.is_file():
      return path.resolve(), arg or None
  configs = sorted(available_configs(plugin.config_dir))
  message = (
      f"config {name!r} not found: no file {str(as_path)!r}, and plugin"
      f" {plugin.name!r} has no config {relative.stem!r}"
  )
  message += plugin_api.did_you_mean(relative.stem, configs)
  listed = ", ".join(configs) if configs else "none"
  raise plugin_api.UsageError(f"{message} Its configs: {listed}")


def load_config(
    path: pathlib.Path, arg: str | None = None
) -> ml_collections.ConfigDict:
  """A config file's locked `get_config(arg)` (`get_config()` for None);
  every failure to produce a ConfigDict is a `plugin_api.UsageError`."""
  try:
    module = config_files.import_file(path)
  except ValueError as e:
    raise plugin_api.UsageError(str(e)) from e
  except SyntaxError as e:  # Where, as one line: not importlib's frames.
    raise plugin_api.UsageError(
        f"config {str(path)!r} line {e.lineno}: {e.msg}:"
        f" {(e.text or '').strip()!r}"
    ) from e
  get_config = getattr(module, "get_config", None)
  if not callable(get_config):
    raise plugin_api.UsageError(f"config {str(path)!r} defines no get_config()")
  args = () if arg is None else (arg,)
  label = path.name if arg is None else f"{path.name}:{arg}"
  try:
    inspect.signature(get_config).bind(*args)
  except TypeError as e:
    wanted = "no ARG" if arg is not None else "an ARG (CONFIG:ARG)"
    raise plugin_api.UsageError(f"config {label} takes {wanted}") from e
  try:
    config = get_config(*args)
  except ValueError as e:
    raise plugin_api.UsageError(f"config {label}: {e}") from e
  if not isinstance(config, ml_collections.ConfigDict):
    raise plugin_api.UsageError(
        f"config {label}: get_config() returned a {type(config).__name__},"
        " expected an ml_collections.ConfigDict"
    )
  config.lock()
  return config


def apply_overrides(
    config: ml_collections.ConfigDict, overrides: Sequence[Override]
) -> list[Override]:
  """Applies overrides in order, in place, each parsed to its field's type;
  returns them with their parsed values."""
  applied = []
  for override in overrides:
    parent, leaf = _find_field(config, override.key)
    value = _parse_value(override, parent.get_type(leaf), parent[leaf])
    try:
      parent[leaf] = value
    except (TypeError, ValueError) as e:
      raise plugin_api.UsageError(
          f"invalid value for --config.{override.key}: {e}"
      ) from e
    applied.append(Override(override.key, value))
  return applied


def format_config(config: ml_collections.ConfigDict) -> list[str]:
  """Returns one `dotted.key = repr(value)` line per leaf, sorted."""
  lines = []
  for key, value in config.items():
    if isinstance(value, ml_collections.ConfigDict):
      lines.extend(f"{key}.{line}" for line in format_config(value))
    else:
      lines.append(f"{key} = {value!r}")
  return lines


def _find_field(
    config: ml_collections.ConfigDict, key: str
) -> tuple[ml_collections.ConfigDict, str]:
  """Returns (the section holding `key`'s leaf, the leaf name)."""
  parts = key.split(".")
  node = config
  for depth, part in enumerate(parts):
    if part not in node:
      where = ".".join(parts[:depth])
      message = f"unknown config key {key!r}" + plugin_api.did_you_mean(
          part, node.keys(), "".join(p + "." for p in parts[:depth])
      )
      scope = f"under {where!r}" if where else "at the top level"
      raise plugin_api.UsageError(
          f"{message} Valid keys {scope}: {', '.join(node.keys())}"
      )
    child = node[part]
    if depth == len(parts) - 1:
      break
    if not isinstance(child, ml_collections.ConfigDict):
      prefix = ".".join(parts[: depth + 1])
      raise plugin_api.UsageError(
          f"unknown config key {key!r}: {prefix!r} holds a value of type"
          f" {type(child).__name__}, not a section"
      )
    node = child
  if isinstance(child, ml_collections.ConfigDict):
    raise plugin_api.UsageError(
        f"config key {key!r} is a section, not a value; set one of its"
        f" keys instead: {', '.join(f'{key}.{k}' for k in child.keys())}"
    )
  return node, parts[-1]


def _parse_value(
    override: Override, field_type: type[Any], current: Any
) -> Any:
  """Parses an override's text as `field_type`, the type of its field.

  A tuple or list of strings (by its `current` value) also takes bare
  comma-separated words: `--config.tasks=sort,count`.
  """
  raw = override.value

  def invalid(expected: str) -> plugin_api.UsageError:
    return plugin_api.UsageError(
        f"invalid value for --config.{override.key}: expected {expected},"
        f" got {raw!r}"
    )

  if field_type is bool:
    if raw.lower() not in _TRUE | _FALSE:
      raise invalid("bool (true/false/1/0/yes/no)")
    return raw.lower() in _TRUE
  if field_type in (int, float):
    try:
      return field_type(raw)
    except ValueError:
      raise invalid(field_type.__name__) from None
  if field_type is str:
    return raw
  try:
    literal = ast.literal_eval(raw)
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
    literal = _NOT_A_LITERAL
  if field_type is type(None):
    # An untyped None field: a Python literal if it is one, else the text.
    return raw if literal is _NOT_A_LITERAL else literal
  if field_type in (tuple, list):
    words = current and all(isinstance(v, str) for v in current)
    if literal is _NOT_A_LITERAL and words:
      return field_type(word.strip() for word in raw.split(","))
    if not isinstance(literal, (tuple, list)):
      raise invalid(f"{field_type.__name__} literal such as '(1, 2)'")
    return field_type(literal)
  if literal is _NOT_A_LITERAL or not isinstance(literal, field_type):
    raise invalid(f"{field_type.__name__} (as a Python literal)")
  return literal
