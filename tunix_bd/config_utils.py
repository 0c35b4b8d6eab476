# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's frozen setting dataclasses and their config sections.

A settings dataclass is the single source of its section's defaults:
`to_section` builds a config's section from it (a config states only what
it changes), and `from_section` builds the dataclass back from the section,
checked. Also the checks of single setting values the dataclasses share.

One dataclass may serve several sections (`model.scratch_bd` and `bd`), each
holding some of its fields: a section's keys are `section_keys` (a builder's
`keys`, else the class's `SECTION_KEYS`, else every field), and only they
are read, written and fingerprinted. Its checks name a key by `key(name,
section)`: under the section being built (`from_section`'s `what`), so the
one class's errors name each section's own keys.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
from typing import Any, Mapping, TypeVar

from ml_collections import config_dict
import numpy as np

T = TypeVar("T")

# The section `from_section` is building, for `key`.
_SECTION = contextvars.ContextVar("section", default="")
# The instance attribute holding the keys of the section it was built from.
_KEYS = "_tunix_bd_section_keys"
# The recipe config field metadata key that `section()` sets.
SECTION_KEYS = "tunix_bd_section_keys"


def section_keys(settings: Any) -> tuple[str, ...]:
  """The config keys of settings dataclass (or instance) `settings`.

  Those of the section it was built from (`from_section`'s `keys`, known
  to its `__post_init__` already), else the class's `SECTION_KEYS`, else
  every init field.
  """
  keys = getattr(settings, _KEYS, None) or getattr(
      settings, "SECTION_KEYS", None
  )
  if keys:
    return tuple(keys)
  return tuple(f.name for f in dataclasses.fields(settings) if f.init)


def section_fields(settings: Any) -> list[dataclasses.Field]:
  """The dataclass fields of `settings`' keys (`section_keys`), in order."""
  keys = set(section_keys(settings))
  return [f for f in dataclasses.fields(settings) if f.name in keys]


def key(name: str, section: str) -> str:
  """`SECTION.name`, how a check names a key: under the section `from_section`
  is building, else `section` (an instance built directly)."""
  return f"{_SECTION.get() or section}.{name}"


def section(*keys: str) -> Any:
  """A recipe config field whose section holds only `keys` of its class.

  `run.stage.Stage` builds the section with them (`from_section`'s `keys`).
  """
  return dataclasses.field(metadata={SECTION_KEYS: keys})


# Optional fields' types, for typed command-line overrides of a None default.
_PLACEHOLDER_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _section_value(field: dataclasses.Field) -> Any:
  if field.default is not dataclasses.MISSING:
    value = field.default
  elif field.default_factory is not dataclasses.MISSING:
    value = field.default_factory()
  else:
    return dataclasses.MISSING
  if value is None and isinstance(field.type, str):
    base = field.type.replace(" | None", "").replace("None | ", "").strip()
    if base in _PLACEHOLDER_TYPES:
      # A plain None could not be overridden by `--config.KEY=1`.
      return config_dict.placeholder(_PLACEHOLDER_TYPES[base])
  return value


def to_section(
    cls: type, *, keys: tuple[str, ...] = (), **overrides: Any
) -> config_dict.ConfigDict:
  """A config section of dataclass `cls`: its defaults, then `overrides`.

  Configs build their typed sections with this, so a setting's default is
  written once, in its dataclass.

  Args:
    keys: the fields the section holds; empty: `section_keys(cls)`.
    **overrides: the fields this config sets otherwise; fields without a
      default must be given.
  """
  keys = keys or section_keys(cls)
  fields = {
      f.name: f for f in dataclasses.fields(cls) if f.init and f.name in keys
  }
  unknown = sorted(set(overrides) - set(fields))
  if unknown:
    raise ValueError(
        f"{cls.__name__} has no fields {unknown}; its fields are"
        f" {list(fields)}."
    )
  section = {}
  for name, field in fields.items():
    value = overrides.get(name, _section_value(field))
    if value is dataclasses.MISSING:
      raise ValueError(f"{cls.__name__}.{name} has no default: set it.")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      # A nested section (e.g. `model.scratch`): its own fields, as they are.
      nested_fields = section_fields(value)
      value = to_section(
          type(value),
          keys=section_keys(value),
          **{f.name: getattr(value, f.name) for f in nested_fields if f.init},
      )
    section[name] = value
  return config_dict.ConfigDict(section)


def nested(
    cls: type[T], value: Any, what: str, keys: tuple[str, ...] = ()
) -> T:
  """`value` as dataclass `cls` of section `what` holding `keys`.

  An instance of those keys as it is; else built from its section (or from
  the instance's values of `keys`).
  """
  if isinstance(value, cls):
    if not keys or section_keys(value) == tuple(keys):
      return value
    value = {k: getattr(value, k) for k in keys}
  return from_section(cls, value, what, keys)


# The field metadata key that `resumable()` sets.
RESUMABLE = "tunix_bd_resumable"


def resumable(**field_kwargs) -> Any:
  """A settings field that may change when a run resumes.

  Such a field does not change what the run's checkpoints mean, only how far
  the run goes or how often it reports: e.g. `train.max_steps` (extend a
  finished run), `train.eval_every_n_steps`. Every other field of a settings
  dataclass enters the fingerprint (`tunix_bd.run.provenance.section_fields`).
  `field_kwargs` go to `dataclasses.field` (e.g. `default=`).
  """
  return dataclasses.field(metadata={RESUMABLE: True}, **field_kwargs)


# The field metadata key that `source()` sets: "checkpoint" or "file".
SOURCE = "tunix_bd_source"
CHECKPOINT = "checkpoint"
FILE = "file"


def source(
    kind: str,
    default: str = "",
    *,
    required: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
  """A settings field naming something a run reads, identified by content.

  Run fingerprints hold its content's digest, never its path
  (`tunix_bd.run.stage`): a moved source resumes, a replaced one is refused.

  Args:
    kind: `CHECKPOINT` (a model directory) or `FILE` (a data file).
    default: the path; empty means none.
    required: a checkpoint the run cannot do without: checked before any
      compute even when empty, unless `random_init` replaces it.
    metadata: more field metadata (e.g. `resumable`'s).
  """
  if kind not in (CHECKPOINT, FILE):
    raise ValueError(f"source kind must be {CHECKPOINT!r} or {FILE!r}.")
  return dataclasses.field(
      default=default,
      metadata={SOURCE: kind, "required": required, **(metadata or {})},
  )


def section_dict(cfg: Any, what: str) -> dict[str, Any]:
  """A ConfigDict section (or mapping) as a plain dict."""
  if hasattr(cfg, "to_dict"):
    cfg = cfg.to_dict()
  if not isinstance(cfg, Mapping):
    raise ValueError(
        f"the {what} config must be a ConfigDict or mapping, got "
        f"{type(cfg).__name__}."
    )
  return dict(cfg)


def from_section(
    cls: type[T], cfg: Any, what: str, keys: tuple[str, ...] = ()
) -> T:
  """Builds dataclass `cls` from a config section; unknown keys fail.

  A typo must never fall back silently to a default.

  Args:
    cfg: a ConfigDict section or a mapping.
    what: how errors name the section (e.g. "corruption"); the checks of
      `cls` name their keys under it (`key`).
    keys: the fields the section holds (the others keep their defaults and
      are not the section's); empty: `section_keys(cls)`.
  """
  values = section_dict(cfg, what)
  fields = list(keys or section_keys(cls))
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise ValueError(
        f"unknown {what} config keys {unknown}; valid keys are {fields}."
    )
  settings = cls.__new__(cls)
  if keys:  # Before `__post_init__`, whose checks may depend on them.
    object.__setattr__(settings, _KEYS, tuple(keys))
  token = _SECTION.set(what)
  try:
    settings.__init__(**values)
  finally:
    _SECTION.reset(token)
  return settings


def check_int(name: str, value: Any, minimum: int) -> int:
  """`value` as a Python int; a ValueError naming `name` unless >= minimum."""
  # bool is an int subclass; True as a size or an id is a bug, not 1.
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(
        f"{name} must be an int, got {type(value).__name__}: {value!r}."
    )
  if value < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {value}.")
  return int(value)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
  """`value` if it is one of the strings `choices`; else a ValueError naming
  `name`."""
  if not isinstance(value, str) or value not in choices:
    raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}.")
  return value


def check_number(
    name: str, value: Any, minimum: float, *, strict: bool = False
) -> float:
  """`value` as a float; a ValueError naming `name` unless it is a finite
  number >= minimum (> minimum when `strict`)."""
  if (
      isinstance(value, bool)
      or not isinstance(value, (int, float, np.integer, np.floating))
      or not math.isfinite(value)
      or value < minimum
      or (strict and value == minimum)
  ):
    want = f"> {minimum:g}" if strict else f">= {minimum:g}"
    raise ValueError(f"{name} must be a finite number {want}, got {value!r}.")
  return float(value)
