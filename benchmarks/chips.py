# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The accelerators' figures the benchmarks' rooflines divide by.

By `jax.Device.device_kind`, from the vendors' data sheets: HBM bandwidth
(`bench_decode`'s HBM roofline) and dense bfloat16 matmul peak
(`bench_sft`'s model FLOP utilisation). A device not listed (a CPU) has
neither, and the tables print `-`.
"""

from __future__ import annotations

import jax

# HBM bandwidth, bytes/s.
HBM_BYTES_PER_S = {
    "TPU v4": 1.2e12,
    "TPU v5 lite": 819e9,  # TPU v5e.
    "TPU v5": 2.765e12,  # TPU v5p.
    "TPU v6 lite": 1.64e12,  # TPU v6e (Trillium).
    "NVIDIA A100-SXM4-40GB": 1.555e12,
    "NVIDIA A100-SXM4-80GB": 2.039e12,
    "NVIDIA H100 80GB HBM3": 3.35e12,
    "NVIDIA H200": 4.8e12,
}

# Dense bfloat16 matmul peak, FLOP/s.
PEAK_BF16_FLOPS = {
    "TPU v4": 275e12,
    "TPU v5 lite": 197e12,
    "TPU v5": 459e12,
    "TPU v6 lite": 918e12,
    "NVIDIA A100-SXM4-40GB": 312e12,
    "NVIDIA A100-SXM4-80GB": 312e12,
    "NVIDIA H100 80GB HBM3": 989e12,
    "NVIDIA H200": 989e12,
}


def hbm_bytes_per_s(device: jax.Device | None = None) -> float | None:
  """The device's HBM bandwidth (default: the first device); None: unknown."""
  return HBM_BYTES_PER_S.get((device or jax.devices()[0]).device_kind)


def peak_flops(device: jax.Device | None = None) -> float | None:
  """The device's bfloat16 peak (default: the first device); None: unknown."""
  return PEAK_BF16_FLOPS.get((device or jax.devices()[0]).device_kind)
