# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Host memory on CPU: buffers a step frees go back to the system.

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
"""

from __future__ import annotations

import ctypes
import sys

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
