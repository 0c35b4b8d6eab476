# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Where training metrics go (TensorBoard and `metrics.jsonl`) and reading them.

`metrics.jsonl` holds TensorBoard's scalars, one `{"name", "step",
"value"}` object per line, for people and scripts.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import numpy as np

from tunix_bd import files

METRICS_FILE = "metrics.jsonl"


class JsonlMetricsBackend:
  """A Tunix metrics backend that appends scalars to a JSONL file: a local
  file each line as it is logged, a URL (an object store cannot append) in
  batches of `URL_BATCH_LINES` and at `close()`."""

  URL_BATCH_LINES = 64

  def __init__(self, path: str):
    self._path = path
    self._closed = False
    self._pending = []
    self._batch = self.URL_BATCH_LINES if files.is_url(path) else 1

  def log_scalar(self, event: str, value: Any, **kwargs):
    # jax.monitoring also reports JAX's own events, and may still call a
    # listener that Tunix failed to clear after closing.
    if self._closed or event.startswith("/jax/"):
      return
    step = kwargs.get("step")
    record = {"name": event, "step": None if step is None else int(step)}
    record["value"] = float(np.asarray(value))
    self._pending.append(json.dumps(record))
    if len(self._pending) >= self._batch:
      self._flush()

  def _flush(self):
    files.append_lines(self._path, self._pending)
    self._pending = []

  def close(self):
    if not self._closed:
      self._flush()
    self._closed = True


def read_records(workdir: str) -> list[dict[str, Any]]:
  """Every `{"name", "step", "value"}` record of `workdir/metrics.jsonl`."""
  path = os.path.join(workdir, METRICS_FILE)
  if not files.exists(path):
    return []
  lines = files.read_text(path).splitlines()
  return [json.loads(line) for line in lines if line.strip()]


def drop_records(workdir: str, drop: Callable[[dict[str, Any]], bool]) -> int:
  """Rewrites `workdir/metrics.jsonl` without the records `drop` picks;
  returns how many (none: the file is left untouched)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not files.exists(path):
    return 0
  lines = [line for line in files.read_text(path).splitlines() if line.strip()]
  kept = [line for line in lines if not drop(json.loads(line))]
  if len(kept) < len(lines):
    files.write_text(path, "".join(line + "\n" for line in kept))
  return len(lines) - len(kept)


def read_metrics(workdir: str, name: str) -> list[tuple[int, float]]:
  """`(step, value)` pairs of one metric from `workdir/metrics.jsonl`."""
  return [
      (r["step"], r["value"])
      for r in read_records(workdir)
      if r["name"] == name
  ]
