# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `(fsdp, tp)` device mesh every recipe trains and decodes on.

`MeshSettings` is the `mesh` config section, field for field. Code that
calls Tunix under a mesh enters it with `tunix_context` (see there).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Sequence
import warnings

import jax
from jax.experimental import mesh_utils

from tunix_bd import config_utils

MESH_AXES = ("fsdp", "tp")


@dataclasses.dataclass(frozen=True)
class MeshSettings:
  """Axis sizes; `fsdp=-1` takes every device that `tp` leaves.

  Where a run computes, not what: a resume may change them.
  """

  fsdp: int = config_utils.resumable(default=-1)
  tp: int = config_utils.resumable(default=1)

  def __post_init__(self):
    config_utils.check_int("mesh.tp", self.tp, 1)
    config_utils.check_int("mesh.fsdp", self.fsdp, -1)
    if self.fsdp == 0:
      raise ValueError("mesh.fsdp must be >= 1 or -1, got 0.")


def make_mesh(
    settings: MeshSettings,
    devices: Sequence[jax.Device] | None = None,
    *,
    what: str = "mesh",
) -> jax.sharding.Mesh:
  """Builds the `(fsdp, tp)` mesh over `devices` (default: all devices).

  `jax.make_mesh` orders the devices by the physical topology (rings on
  TPU); the axes stay `Auto`, as Tunix's sharding annotations expect.

  Args:
    settings: the axis sizes.
    devices: the devices, all of them used; every device by default.
    what: how errors name the section (e.g. "mesh.rollout").

  Raises:
    ValueError: if the axis sizes do not multiply to the device count.
  """
  devices = list(jax.devices() if devices is None else devices)
  fsdp, tp = settings.fsdp, settings.tp
  if fsdp == -1:
    fsdp = len(devices) // tp
  if fsdp < 1 or fsdp * tp != len(devices):
    raise ValueError(
        f"{what}.fsdp * {what}.tp = {fsdp} * {tp} must equal the"
        f" {len(devices)} devices of {what}."
    )
  axis_types = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
  num_slices = len({getattr(d, "slice_index", 0) for d in devices})
  if num_slices == 1:
    return jax.make_mesh((fsdp, tp), MESH_AXES, axis_types, devices=devices)
  # Across slices (DCN) only data parallelism: `fsdp` spans the slices.
  if fsdp % num_slices:
    raise ValueError(
        f"{what}.fsdp = {fsdp} must be a multiple of the {num_slices} slices"
        f" the devices of {what} span."
    )
  grid = mesh_utils.create_hybrid_device_mesh(
      (fsdp // num_slices, tp), (num_slices, 1), devices
  )
  return jax.sharding.Mesh(grid, MESH_AXES, axis_types=axis_types)


def spec_axes(spec: jax.sharding.PartitionSpec) -> set[str]:
  """The mesh axis names a partition spec shards over."""
  axes = set()
  for entry in spec:
    if entry is None or entry is jax.sharding.PartitionSpec.UNCONSTRAINED:
      continue
    axes.update(entry if isinstance(entry, tuple) else (entry,))
  return axes


def from_section(section) -> jax.sharding.Mesh:
  """The mesh of a recipe's `mesh` config section (or mapping)."""
  return make_mesh(config_utils.from_section(MeshSettings, section, "mesh"))


# JAX's warning on entering a `Mesh` as a context manager.
_LEGACY_CONTEXT_WARNING = r"`with mesh:` context manager has been deprecated"


@contextlib.contextmanager
def tunix_context(mesh: jax.sharding.Mesh) -> Iterator[jax.sharding.Mesh]:
  """`with mesh:` for Tunix 0.1.7, without JAX's deprecation warning.

  Tunix reads the ambient mesh from JAX's legacy resource environment
  (`pxla.thread_resources.env.physical_mesh`): `PeftTrainer` shards its
  optimizer state and `shard_input` its batches over it, and Qwen3 adds
  activation sharding constraints on it. Only `with mesh:` sets that
  environment; `jax.set_mesh(mesh)`, which JAX 0.10 recommends instead,
  leaves it empty, and Tunix would then silently not shard its optimizer
  or inputs. So the legacy context stays, and the DeprecationWarning JAX
  raises at each entry is filtered for that entry alone (a
  `warnings.catch_warnings` block: process-wide for its duration, as
  Python's warning filters are).

  Args:
    mesh: the mesh Tunix's calls inside the block run on.

  Yields:
    `mesh`.
  """
  with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", _LEGACY_CONTEXT_WARNING, category=DeprecationWarning
    )
    mesh.__enter__()  # pylint: disable=unnecessary-dunder-call
  try:
    yield mesh
  finally:
    mesh.__exit__(None, None, None)
