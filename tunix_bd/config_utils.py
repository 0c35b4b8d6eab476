# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's frozen setting dataclasses and their config sections.

A config section is a frozen, kw_only dataclass whose init fields are its
keys and whose `SECTION` names its key path (e.g. "model.scratch_bd") in
errors; variants are subclasses or composed groups. The dataclass is the
one source of its defaults: `to_section` builds a config's section from it,
`from_section` the dataclass back, checked (an unknown key fails). Also the
checks of single values the dataclasses share.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Mapping, TypeVar

from ml_collections import config_dict
import numpy as np

T = TypeVar("T")

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


def to_section(cls: type, **overrides: Any) -> config_dict.ConfigDict:
  """A config section of dataclass `cls`: its defaults, then `overrides`
  (required for fields without one); a nested dataclass value (e.g.
  `model.scratch`) becomes a sub-section."""
  fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
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
      value = to_section(
          type(value),
          **{f.name: getattr(value, f.name) for f in dataclasses.fields(value)},
      )
    section[name] = value
  return config_dict.ConfigDict(section)


# The field metadata key that `resumable()` sets.
RESUMABLE = "tunix_bd_resumable"


def resumable(**field_kwargs) -> Any:
  """A settings field that may change when a run resumes (`field_kwargs`
  go to `dataclasses.field`): it changes how far a run goes or how often it
  reports, not what its checkpoints mean (e.g. `train.max_steps`). Every
  other field enters the fingerprint (docs/design.md "Fingerprint").
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
  """A settings field naming a `CHECKPOINT` directory or a data `FILE` a
  run reads, fingerprinted by content, never path: a moved source resumes,
  a replaced one is refused. The `default` path "" means none; a `required`
  checkpoint is checked before compute even when empty (unless
  `random_init` replaces it); `metadata` adds field metadata."""
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


def from_section(cls: type[T], cfg: Any, what: str) -> T:
  """Builds dataclass `cls` from a section `cfg` (a ConfigDict or
  mapping) that errors name `what`; an unknown key (a typo) fails, never
  silently a default. A nested dataclass is built from its sub-mapping."""
  values = section_dict(cfg, what)
  fields = [f.name for f in dataclasses.fields(cls) if f.init]
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise ValueError(
        f"unknown {what} config keys {unknown}; valid keys are {fields}."
    )
  hints = typing.get_type_hints(cls)
  for name, value in values.items():
    nested = hints.get(name)
    if dataclasses.is_dataclass(nested) and not isinstance(value, nested):
      values[name] = from_section(nested, value, f"{what}.{name}")
  return cls(**values)


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


def check_bool(name: str, value: Any) -> bool:
  """`value` if it is a bool; else a ValueError naming `name`."""
  if not isinstance(value, bool):
    raise ValueError(f"{name} must be a bool, got {value!r}.")
  return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
  """`value` if it is one of the strings `choices`; else a ValueError naming
  `name`."""
  if not isinstance(value, str) or value not in choices:
    raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}.")
  return value


def is_threshold(value: Any) -> bool:
  """Whether `value` is a commit threshold: a number in (0, 1], not a bool."""
  return (
      isinstance(value, (int, float))
      and not isinstance(value, bool)
      and 0 < value <= 1
  )


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
