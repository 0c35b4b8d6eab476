# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Writing evaluation results: JSON files and aligned text tables."""

from __future__ import annotations

import json
from typing import Any

from absl import logging

from tunix_bd import files


def write_json(path: str, content: Any) -> None:
  """Writes `content` as JSON, whole (a crash leaves no half file)."""
  files.write_text(path, json.dumps(content, indent=1))


def percent_table(title: str, rows: dict[str, float]) -> str:
  """A small aligned `name  value%` table under `title`, also logged."""
  width = max(len(k) for k in rows)
  lines = [title] + [f"  {k:<{width}}  {v:7.2%}" for k, v in rows.items()]
  text = "\n".join(lines)
  logging.info("%s", text)
  return text
