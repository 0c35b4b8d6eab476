# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `(fsdp, tp)` device mesh every recipe trains and decodes on.

`MeshSettings` is the `mesh` config section, field for field.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from tunix_bd import config_utils

MESH_AXES = ("fsdp", "tp")


@dataclasses.dataclass(frozen=True)
class MeshSettings:
  """Axis sizes; `fsdp=-1` takes every device that `tp` leaves."""

  fsdp: int = -1
  tp: int = 1

  def __post_init__(self):
    config_utils.check_int("mesh.tp", self.tp, 1)
    config_utils.check_int("mesh.fsdp", self.fsdp, -1)
    if self.fsdp == 0:
      raise ValueError("mesh.fsdp must be >= 1 or -1, got 0.")


def make_mesh(settings: MeshSettings) -> jax.sharding.Mesh:
  """Builds the `(fsdp, tp)` mesh over all devices.

  Raises:
    ValueError: if the axis sizes do not multiply to the device count.
  """
  num_devices = jax.device_count()
  fsdp, tp = settings.fsdp, settings.tp
  if fsdp == -1:
    fsdp = num_devices // tp
  if fsdp * tp != num_devices:
    raise ValueError(
        f"mesh.fsdp * mesh.tp = {fsdp} * {tp} must equal the {num_devices} "
        "available devices."
    )
  devices = np.asarray(jax.devices()).reshape(fsdp, tp)
  return jax.sharding.Mesh(devices, MESH_AXES)


def from_section(section) -> jax.sharding.Mesh:
  """The mesh of a recipe's `mesh` config section (or mapping)."""
  return make_mesh(config_utils.from_section(MeshSettings, section, "mesh"))
