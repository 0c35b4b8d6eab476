# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Writing evaluation results as JSON."""

from __future__ import annotations

import json
from typing import Any

from tunix_bd import files


def write_json(path: str, content: Any) -> None:
  """Writes `content` as JSON, whole (a crash leaves no half file)."""
  files.write_text(path, json.dumps(content, indent=1))
