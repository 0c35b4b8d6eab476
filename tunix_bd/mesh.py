# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `(fsdp, tp)` device mesh every recipe trains and decodes on: the
`mesh` section (`MeshSettings`; an RL recipe's `RoleMeshSettings`), and
`tunix_context`, which code that calls Tunix under a mesh enters.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import ClassVar, Iterator, Sequence
import warnings

import jax
from jax.experimental import mesh_utils

from tunix_bd import config_utils

MESH_AXES = ("fsdp", "tp")
# The roles of an RL run, each with a mesh (`rl.meshes`).
ROLES = ("actor", "reference", "rollout")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoleSettings:
  """One role's `mesh.<role>` (`rl.meshes`): `devices`, a count (int >= 1)
  or a fraction of all (float in (0, 1]: 1.0 is every device), or `slices`,
  whole TPU slices (neither: the actor takes what is left, the other roles
  share its mesh); `fsdp`/`tp` default to `mesh`'s. Where a
  role computes, not what: a resume may change them."""

  devices: int | float | None = config_utils.resumable(default=None)
  slices: int | None = config_utils.resumable(default=None)
  fsdp: int | None = config_utils.resumable(default=None)
  tp: int | None = config_utils.resumable(default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeshSettings:
  """A recipe's `mesh`: axis sizes; `fsdp=-1` takes every device that `tp`
  leaves. Where a run computes, not what: a resume may change any."""

  SECTION: ClassVar[str] = "mesh"

  fsdp: int = config_utils.resumable(default=-1)
  tp: int = config_utils.resumable(default=1)

  def __post_init__(self):
    config_utils.check_int(f"{self.SECTION}.tp", self.tp, 1)
    config_utils.check_int(f"{self.SECTION}.fsdp", self.fsdp, -1)
    if self.fsdp == 0:
      raise ValueError(f"{self.SECTION}.fsdp must be >= 1 or -1, got 0.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoleMeshSettings(MeshSettings):
  """An RL recipe's `mesh`: `fsdp` and `tp` (each role's default), each
  role's `RoleSettings`, the `data_sharding_axes` Tunix shards batches over
  and whether roles given devices of their own are `disjoint`."""

  data_sharding_axes: tuple[str, ...] = config_utils.resumable(
      default=("fsdp",)
  )
  disjoint: bool = config_utils.resumable(default=True)
  actor: RoleSettings = config_utils.resumable(default=RoleSettings())
  reference: RoleSettings = config_utils.resumable(default=RoleSettings())
  rollout: RoleSettings = config_utils.resumable(default=RoleSettings())

  def __post_init__(self):
    super().__post_init__()
    key = f"{self.SECTION}.data_sharding_axes"
    axes = tuple(self.data_sharding_axes)
    if not axes or len(set(axes)) != len(axes):
      raise ValueError(
          f"{key} must name distinct mesh axes, got"
          f" {self.data_sharding_axes!r}."
      )
    unknown = sorted(set(axes) - set(MESH_AXES))
    if unknown:
      raise ValueError(
          f"{key} names {unknown}, which are not mesh axes {MESH_AXES}."
      )
    config_utils.check_bool(f"{self.SECTION}.disjoint", self.disjoint)


def make_mesh(
    settings: MeshSettings,
    devices: Sequence[jax.Device] | None = None,
    *,
    what: str = "mesh",
) -> jax.sharding.Mesh:
  """The `(fsdp, tp)` mesh over all of `devices` (default: all), in
  topology order (`jax.make_mesh`), axes `Auto` as Tunix expects. A
  ValueError unless `fsdp * tp` is the device count (and `fsdp` a multiple
  of the slices they span); `what` names the section (e.g. "mesh.rollout").
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
  (`PeftTrainer` shards its optimizer state and inputs over it, Qwen3 its
  activations), which only `with mesh:` sets: under `jax.set_mesh` Tunix
  would silently not shard. The DeprecationWarning is filtered for the
  entry alone (process-wide while it lasts, as warning filters are).
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
