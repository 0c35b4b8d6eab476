# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Host memory on CPU: steps that keep little, buffers freed to the system.

On the CPU backend every array, activation and XLA temporary is a host
`malloc`. glibc serves an allocation under its mmap threshold from its heaps,
and memory freed inside a heap stays with the process. The threshold starts
at 128 KiB but rises to the size of each mapped block that is freed, up to
32 MiB: once a model is loaded, every buffer under 32 MiB (a layer's weights,
gradients and activations at Qwen3-0.6B's widths) comes from the heaps, and
what an evaluation or a train step frees stays resident while the next one
allocates anew. At Qwen3-0.6B (28 layers, batch 1 x 512) the first
evaluation left about 4 GB resident that way, on top of which the train step
ran.

`return_freed_buffers` fixes the threshold at `THRESHOLD_BYTES`, which also
stops it moving: every larger buffer is mapped on its own and unmapped when
freed. Smaller ones (norm weights, scalars) stay on the heaps.

`schedule_for_memory` asks XLA's CPU compiler for its memory-minimising
scheduler. Its default, concurrency-optimised one runs the recomputation of
every rematerialised layer as early as it can, so `model.remat` saved
nothing on CPU: XLA's own memory analysis of a 6-layer step at Qwen3-0.6B's
widths (batch 1 x 512, complementary rows, float32) planned 4.86 GiB of
temporaries with `decoder` remat and with none alike, 2.65 GiB with this
scheduler; the 28-layer step went from over 16 GB resident (stopped) to a
completed run.

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

  Returns:
    Whether the C library took the setting (False off glibc, e.g. macOS or
    musl, where nothing changes).
  """
  if not sys.platform.startswith("linux"):
    return False
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):  # A C library without mallopt.
    return False
  mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
  return bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD_BYTES))


def schedule_for_memory() -> bool:
  """Sets `--xla_cpu_enable_concurrency_optimized_scheduler=false`.

  XLA reads `XLA_FLAGS` once, when its first backend starts, so this must
  run before any computation.

  Returns:
    Whether the flag was added (False when `XLA_FLAGS` already names it:
    the user's setting is kept).
  """
  flags = os.environ.get("XLA_FLAGS", "")
  if _SCHEDULER_FLAG in flags:
    return False
  os.environ["XLA_FLAGS"] = f"{flags} {_SCHEDULER_FLAG}=false".strip()
  return True


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
