# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The TPU scripts' shared setup: the realistic model's shape, a timer.

Imported by its neighbours (run as `PYTHONPATH=. python tools/tpu/X.py`,
which puts this folder on the path).
"""

import argparse
import dataclasses
import os
import time

from benchmarks import fixed_schedule
from tunix_bd.models import from_scratch


def parse_args(
    description: str, methods: tuple[str, ...] = ()
) -> argparse.Namespace:
  """`--tiny` (a 2-layer smoke run on a CPU), `--out` (default `$OUT`) and,
  given `methods`, `--methods` (comma-separated, default all)."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--out", default=os.environ.get("OUT", "."))
  if methods:
    parser.add_argument("--methods", default=",".join(methods))
  args = parser.parse_args()
  if methods:
    args.methods = tuple(args.methods.split(","))
    if not set(args.methods) <= set(methods):
      parser.error(f"--methods must be among {list(methods)}")
  return args


def model_shape(tiny: bool) -> tuple[from_scratch.ScratchModelSettings, int]:
  """`(shape, vocabulary)`: the realistic 0.26 B Qwen3, or a 2-layer one."""
  shape = fixed_schedule.FixedSchedule().model
  if not tiny:
    return shape, 65_536
  tiny_shape = dataclasses.replace(
      shape,
      num_layers=2,
      embed_dim=64,
      hidden_dim=128,
      num_heads=2,
      head_dim=32,
      num_kv_heads=1,
  )
  return tiny_shape, 256


def fastest_ms(call, repeats: int) -> float:
  """The fastest of `repeats` timed calls (after one untimed), in ms."""
  call()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    call()
    best = min(best, time.perf_counter() - start)
  return round(best * 1e3, 3)
