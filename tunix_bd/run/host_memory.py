# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Host memory on CPU: steps that keep little, buffers freed to the system.

On the CPU backend every array, activation and XLA temporary is a host
`malloc`. glibc's mmap threshold rises to the size of each mapped block
freed, up to 32 MiB, so once a model is loaded a layer's buffers come from
its heaps, and what an evaluation or a train step frees stays resident
while the next one allocates anew. `return_freed_buffers` fixes the
threshold at `THRESHOLD_BYTES`: every larger buffer is mapped on its own
and unmapped when freed.

XLA's default, concurrency-optimised CPU scheduler runs the recomputation
of every rematerialised layer as early as it can, so `model.remat` saved
nothing on CPU; `schedule_for_memory` asks for the memory-minimising one
(docs/results.md measures both at Qwen3-0.6B).

`prepare_process` applies both (docs/recipes.md says when).
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
  """Maps every host buffer of at least `THRESHOLD_BYTES` on its own.

  Returns whether the C library took the setting (False off glibc, e.g.
  macOS or musl, where nothing changes).
  """
  if not sys.platform.startswith("linux"):
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):  # A C library without mallopt.
    return False
  mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
  return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD_BYTES))


def add_xla_flag(name: str, value: str) -> bool:
  """Adds `name=value` to `XLA_FLAGS` unless it already names `name`.

  XLA reads `XLA_FLAGS` once, when its first backend starts, so this must
  run before any computation. Returns whether the flag was added (False
  when `XLA_FLAGS` already names it: the user's setting is kept).
  """
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
  """Whether JAX will compute on the CPU, told before any backend starts.

  `JAX_PLATFORMS`' first platform when it is set; else whether no
  accelerator is installed for JAX to prefer (a `jax_plugins` package, e.g.
  CUDA's or ROCm's, or `libtpu`).
  """
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
  """Both settings, before JAX's first backend; the allocator's only where
  every array is a host buffer (`computes_on_cpu`): elsewhere it would only
  add a system call per large host-side array."""
  schedule_for_memory()
  if computes_on_cpu():
    return_freed_buffers()
