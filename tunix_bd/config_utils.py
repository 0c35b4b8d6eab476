# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Building tunix_bd's frozen setting dataclasses from config sections.

Also the checks of single setting values that those dataclasses share.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, TypeVar

import numpy as np

T = TypeVar("T")


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

  Args:
    cls: a dataclass whose fields are the section's keys.
    cfg: a ConfigDict section or a mapping.
    what: how errors name the section (e.g. "corruption").

  Raises:
    ValueError: for a key that is not a field (a typo must never fall back
      silently to a default), or an invalid value.
  """
  values = section_dict(cfg, what)
  fields = [f.name for f in dataclasses.fields(cls)]
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise ValueError(
        f"unknown {what} config keys {unknown}; valid keys are {fields}."
    )
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
