# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The actor, reference and rollout meshes of an RL run, from config.

The `mesh` section (`mesh.RoleMeshSettings`) says which devices each role gets
(docs/design.md "Role meshes"), e.g. `mesh.rollout.devices=4` (the last 4),
`=0.25` (the last quarter) or `mesh.rollout.slices=1` (the last slice).
Devices are ordered by `slice_index` when they have one; with
`mesh.disjoint` (the default) explicit sets must not overlap.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Sequence

from flax import nnx
import jax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib


@dataclasses.dataclass(frozen=True)
class RoleMeshes:
  """Each role's mesh (one object when roles share) and the batch axes."""

  actor: Mesh
  reference: Mesh
  rollout: Mesh
  data_sharding_axes: tuple[str, ...]


def _slice_groups(devices: Sequence[Any]) -> list[list[Any]] | None:
  """The devices grouped by `slice_index` (ascending); None without one."""
  if not all(hasattr(d, "slice_index") for d in devices):
    return None
  groups = {}
  for device in devices:
    groups.setdefault(device.slice_index, []).append(device)
  return [groups[k] for k in sorted(groups)]


def _role_size(
    role: str, settings: mesh_lib.RoleSettings, devices: Sequence[Any]
) -> int | None:
  """How many devices `role` asks for; None when it names none."""
  name = f"mesh.{role}"
  total = len(devices)
  if settings.devices is not None and settings.slices is not None:
    raise ValueError(f"set {name}.devices or {name}.slices, not both.")
  if settings.slices is not None:
    slices = config_utils.check_int(f"{name}.slices", settings.slices, 1)
    groups = _slice_groups(devices)
    if groups is None:
      raise ValueError(
          f"{name}.slices needs devices with a slice_index (TPU slices);"
          f" these {total} devices have none: use {name}.devices."
      )
    if slices > len(groups):
      raise ValueError(
          f"{name}.slices = {slices} is more than the {len(groups)} slices."
      )
    if len({len(g) for g in groups}) > 1:
      raise ValueError(f"{name}.slices needs slices of equal sizes.")
    return slices * len(groups[0])
  count = settings.devices
  if count is None:
    return None
  if isinstance(count, float):
    if not 0 < count <= 1:
      raise ValueError(
          f"{name}.devices = {count} must be a count or a fraction in (0, 1]."
      )
    if not int(count * total):
      raise ValueError(
          f"{name}.devices = {count} of {total} devices leaves {name} no"
          " devices."
      )
    return int(count * total)
  count = config_utils.check_int(f"{name}.devices", count, 1)
  if count > total:
    raise ValueError(
        f"{name}.devices = {count} is more than the {total} devices."
    )
  return count


def assign_devices(
    settings: mesh_lib.RoleMeshSettings, devices: Sequence[Any]
) -> dict[str, list[Any]]:
  """Each role's devices; a role sharing the actor's mesh is left out.
  `devices` are anything with `id` (and `slice_index` if sliced)."""
  groups = _slice_groups(devices)
  ordered = list(devices) if groups is None else sum(groups, [])
  total = len(ordered)
  sizes = {
      r: _role_size(r, getattr(settings, r), ordered) for r in mesh_lib.ROLES
  }
  others = (sizes["reference"] or 0) + (sizes["rollout"] or 0)
  actor = sizes["actor"] if sizes["actor"] is not None else total - others
  if actor < 1:
    raise ValueError(
        "mesh.actor gets no devices: mesh.reference and mesh.rollout take"
        f" {others} of the {total} devices."
    )
  for role in ("reference", "rollout"):
    role_settings = getattr(settings, role)
    for axis in mesh_lib.MESH_AXES:
      if sizes[role] is None and getattr(role_settings, axis) is not None:
        raise ValueError(
            f"mesh.{role}.{axis} is set, but mesh.{role} has no devices of"
            f" its own (it shares mesh.actor's mesh): set mesh.{role}.devices"
            f" or mesh.{role}.slices, or else mesh.actor.{axis}."
        )
  ranges = {"actor": range(0, actor)}
  if sizes["reference"] is not None:
    ranges["reference"] = range(actor, actor + sizes["reference"])
    if ranges["reference"].stop > total:
      raise ValueError(
          f"mesh.actor and mesh.reference take {ranges['reference'].stop} of"
          f" the {total} devices."
      )
  if sizes["rollout"] is not None:
    ranges["rollout"] = range(total - sizes["rollout"], total)
  for first, second in itertools.combinations(ranges, 2):
    shared = sorted(set(ranges[first]) & set(ranges[second]))
    if settings.disjoint and shared:
      raise ValueError(
          f"mesh.{first} and mesh.{second} share devices"
          f" {[ordered[k].id for k in shared]} but mesh.disjoint is"
          " True; give them fewer devices or set mesh.disjoint=False."
      )
  return {role: [ordered[k] for k in ranges[role]] for role in ranges}


def role_settings(section: Any) -> mesh_lib.RoleMeshSettings:
  """`section` as an RL `mesh`: a config section or mapping (one without
  role keys means one shared mesh), or `RoleMeshSettings`."""
  if isinstance(section, mesh_lib.RoleMeshSettings):
    return section
  return config_utils.from_section(mesh_lib.RoleMeshSettings, section, "mesh")


def build(section: Any, devices: Sequence[Any] | None = None) -> RoleMeshes:
  """The role meshes of a `mesh` section (`role_settings`), over `devices`
  (default: all)."""
  settings = role_settings(section)
  if jax.process_count() > 1:
    raise ValueError(
        "role meshes need a single controller (jax.process_count() == 1: one"
        f" host, or Pathways); this run has {jax.process_count()} processes."
    )
  assigned = assign_devices(
      settings, jax.devices() if devices is None else devices
  )
  meshes = {}
  for role, role_devices in assigned.items():
    # `mesh.<role>.fsdp`/`tp`, defaulting to `mesh.fsdp`/`mesh.tp`.
    fsdp, tp = getattr(settings, role).fsdp, getattr(settings, role).tp
    if tp is not None:
      config_utils.check_int(f"mesh.{role}.tp", tp, 1)
    if fsdp is not None and fsdp != -1:
      config_utils.check_int(f"mesh.{role}.fsdp", fsdp, 1)
    sizes = mesh_lib.MeshSettings(
        fsdp=settings.fsdp if fsdp is None else fsdp,
        tp=settings.tp if tp is None else tp,
    )
    meshes[role] = mesh_lib.make_mesh(sizes, role_devices, what=f"mesh.{role}")
  return RoleMeshes(
      actor=meshes["actor"],
      reference=meshes.get("reference", meshes["actor"]),
      rollout=meshes.get("rollout", meshes["actor"]),
      data_sharding_axes=tuple(settings.data_sharding_axes),
  )


def check_model_axes(model: nnx.Module, meshes: RoleMeshes) -> None:
  """Fails, naming the role's mesh section, when the model's partition specs
  name an axis a role mesh lacks, or split a weight's dimension over a
  number of devices that does not divide it (before any weight is placed:
  `model` may be `nnx.eval_shape`'s)."""
  state = nnx.state(model)
  leaves = jax.tree_util.tree_leaves_with_path(state)
  specs = jax.tree.leaves(
      nnx.get_partition_spec(state),
      is_leaf=lambda x: isinstance(x, PartitionSpec),
  )
  axes = set().union(*(mesh_lib.spec_axes(s) for s in specs))
  for role in mesh_lib.ROLES:
    mesh = getattr(meshes, role)
    missing = sorted(axes - set(mesh.axis_names))
    if missing:
      raise ValueError(
          f"the model's partition specs name axes {missing} that mesh.{role}"
          f" (axes {tuple(mesh.axis_names)}) does not have."
      )
    for (path, leaf), spec in zip(leaves, specs):
      for size, entry in zip(leaf.shape, spec):
        split = mesh_lib.spec_axes(PartitionSpec(entry))
        devices = math.prod(mesh.shape[a] for a in split)
        if size % devices:
          name = ".".join(str(getattr(k, "key", k)) for k in path[:-1])
          raise ValueError(
              f"mesh.{role} ({dict(mesh.shape)}) cannot hold the model: its"
              f" {name} of shape {tuple(leaf.shape)} splits a dimension of"
              f" {size} over {sorted(split)}, {devices} devices; give"
              f" mesh.{role} devices, fsdp and tp that divide it."
          )
