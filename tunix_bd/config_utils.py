# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's frozen setting dataclasses and their config sections.

A config section is a small frozen, kw_only dataclass: every init field is
a key of its section, and its class variable `SECTION` names the section's
key path (e.g. "model", "model.scratch_bd"), under which its checks name
their keys. Variants are subclasses (`TimedTrain(Train)`) or composed groups
(`precision.Precision`). The dataclass is the single source of its
section's defaults: `to_section` builds a config's section from it (a
config states only what it changes), and `from_section` builds the
dataclass back from the section, checked (an unknown key fails), nested
sections from their sub-mappings. Also the checks of single setting values
the dataclasses share.
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
  """A config section of dataclass `cls`: its defaults, then `overrides`.

  Configs build their typed sections with this, so a setting's default is
  written once, in its dataclass. A nested section (a dataclass value, e.g.
  `model.scratch`) becomes a sub-section of its fields.

  Args:
    **overrides: the fields this config sets otherwise; fields without a
      default must be given.
  """
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


def from_section(cls: type[T], cfg: Any, what: str) -> T:
  """Builds dataclass `cls` from a config section; unknown keys fail.

  A typo must never fall back silently to a default. A field whose type is
  a dataclass (a nested section, e.g. `model.scratch`) is built from its
  sub-mapping, as section `what.field`.

  Args:
    cfg: a ConfigDict section or a mapping.
    what: how errors name the section (e.g. "corruption").
  """
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
