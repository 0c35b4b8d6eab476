# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Host memory on CPU: steps that keep little, buffers freed to the system.

On CPU every array is a host `malloc`, and glibc's mmap threshold rises
with each mapped block freed (up to 32 MiB), so what a step frees stays
resident while the next allocates anew: `return_freed_buffers` fixes the
threshold at `THRESHOLD_BYTES`. XLA's default CPU scheduler runs every
rematerialised layer's recomputation as early as it can, so `model.remat`
saved nothing: `schedule_for_memory` asks for the memory-minimising one
(docs/results.md measures both). `prepare_process` applies both
(docs/recipes.md says when).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import os
import pkgutil
import sys

_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
# glibc's `mallopt` parameter (malloc.h).
_M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 1 << 20


def return_freed_buffers() -> bool:
  """Maps every host buffer of at least `THRESHOLD_BYTES` on its own;
  returns whether the C library took it (False off glibc)."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):  # A C library without mallopt.
    return False
  mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
  return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD_BYTES))


def add_xla_flag(name: str, value: str) -> bool:
  """Adds `name=value` to `XLA_FLAGS` (read when XLA's first backend
  starts) unless it names `name` already; returns whether it was added."""
  flags = os.environ.get("XLA_FLAGS", "")
  if name in flags:
    return False
  os.environ["XLA_FLAGS"] = f"{flags} {name}={value}".strip()
  return True


def schedule_for_memory() -> bool:
  """Sets `--xla_cpu_enable_concurrency_optimized_scheduler=false`
  (`add_xla_flag`)."""
  return add_xla_flag(_SCHEDULER_FLAG, "false")


def computes_on_cpu() -> bool:
  """Whether JAX will compute on the CPU, told before any backend starts:
  `JAX_PLATFORMS`' first platform, else whether no accelerator (`libtpu`,
  a `jax_plugins` package) is installed."""
  platforms = os.environ.get("JAX_PLATFORMS", "").strip()
  if platforms:
    return platforms.split(",")[0].strip() == "cpu"
  if importlib.util.find_spec("libtpu") is not None:
    return False
  if importlib.metadata.entry_points(group="jax_plugins"):
    return False
  namespace = importlib.util.find_spec("jax_plugins")
  locations = namespace.submodule_search_locations if namespace else None
  return not any(pkgutil.iter_modules(locations or []))


def prepare_process() -> None:
  """Both settings, before JAX's first backend; the allocator's only on CPU
  (elsewhere it would only add a system call per large host array)."""
  schedule_for_memory()
  if computes_on_cpu():
    return_freed_buffers()
