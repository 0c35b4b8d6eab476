# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Writing evaluation results: JSON, and the machine they were measured on."""

from __future__ import annotations

import json
import os
from typing import Any

import jax
from tunix_bd import files


def write_json(path: str, content: Any) -> None:
  """Writes `content` as JSON, whole (a crash leaves no half file)."""
  files.write_text(path, json.dumps(content, indent=1))


def machine() -> str:
  """The device the figures were measured on, for captions."""
  device = jax.devices()[0]
  if device.platform == "cpu":
    return f"CPU, {os.cpu_count()} cores"
  return f"{jax.device_count()} x {device.device_kind}"
