# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Places a model on another role's mesh, and syncs weights across meshes.

Resharding moves only a model's `nnx.Variable` values; a `Mesh`,
`NamedSharding` or sharding partial held as static graph data would keep
naming the actor's devices ("incompatible devices" at the first jitted
forward), so `place_on_mesh` rebinds them too. `copy_params` is the
rollout's weight sync. See docs/design.md "Role meshes".
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Mapping

from absl import logging
from flax import nnx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec
import numpy as np
from tunix_bd import compat
from tunix_bd import mesh as mesh_lib

# NNX's own bookkeeping in every `nnx.Pytree` (flax 0.12.8). Every other
# attribute is inspected, underscore-named ones included: models keep their
# sharding partials under private names (`self._shard`).
_NNX_BOOKKEEPING = frozenset({"_pytree__state", "_pytree__nodes"})


@dataclasses.dataclass
class _Rebinder:
  """Rebinds the concrete meshes inside value trees to `mesh`.

  `count` is the number of `Mesh` and `NamedSharding` leaves replaced;
  `foreign` maps each other mesh met to the path where it was first met.
  """

  mesh: Mesh
  count: int = 0
  foreign: dict[Mesh, str] = dataclasses.field(default_factory=dict)

  def __call__(self, value: Any, path: str) -> Any:
    """Returns `value` rebound, or `value` itself when nothing changed."""
    if isinstance(value, Mesh):
      return self._mesh(value, path)
    if isinstance(value, NamedSharding):
      return self._sharding(value, path)
    if isinstance(value, jax.sharding.Sharding):
      return self._other_sharding(value, path)
    if isinstance(value, functools.partial):
      parts = ("func", "args", "keywords")
      new = [self(getattr(value, p), f"{path}.{p}") for p in parts]
      if all(n is getattr(value, p) for n, p in zip(new, parts)):
        return value
      func, args, keywords = new
      return functools.partial(func, *args, **keywords)
    if isinstance(value, (tuple, list)):
      items = [self(v, f"{path}[{i}]") for i, v in enumerate(value)]
      if all(new is old for new, old in zip(items, value)):
        return value
      if hasattr(value, "_fields"):  # A namedtuple.
        return type(value)(*items)
      return type(value)(items)
    if isinstance(value, dict):
      items = {k: self(v, f"{path}[{k!r}]") for k, v in value.items()}
      if all(items[k] is v for k, v in value.items()):
        return value
      return type(value)(items)
    return value

  def _mesh(self, mesh: Mesh, path: str) -> Mesh:
    if mesh == self.mesh:
      return mesh
    if tuple(mesh.axis_names) != tuple(self.mesh.axis_names):
      raise ValueError(
          f"{path} holds a mesh with axes {tuple(mesh.axis_names)}, but the"
          f" target mesh has axes {tuple(self.mesh.axis_names)}; the shim"
          " rebinds meshes only between identical axis names."
      )
    self.foreign.setdefault(mesh, path)
    self.count += 1
    return self.mesh

  def _sharding(self, sharding: NamedSharding, path: str) -> NamedSharding:
    if not isinstance(sharding.mesh, Mesh) or sharding.mesh == self.mesh:
      return sharding  # An abstract mesh names no devices.
    missing = mesh_lib.spec_axes(sharding.spec) - set(self.mesh.axis_names)
    if missing:
      raise ValueError(
          f"{path} is a NamedSharding with spec {sharding.spec} naming axes"
          f" {sorted(missing)} that the target mesh (axes"
          f" {tuple(self.mesh.axis_names)}) does not have."
      )
    self.foreign.setdefault(sharding.mesh, path)
    self.count += 1
    return NamedSharding(
        self.mesh, sharding.spec, memory_kind=sharding.memory_kind
    )

  def _other_sharding(self, sharding, path: str) -> jax.sharding.Sharding:
    """Keeps a sharding without a mesh only if it is on `mesh`'s devices."""
    outside = sharding.device_set - set(self.mesh.devices.flat)
    if outside:
      raise ValueError(
          f"{path} is a {type(sharding).__name__} on devices"
          f" {sorted(d.id for d in outside)} outside the target mesh; the"
          " shim rebinds only Mesh and NamedSharding values."
      )
    return sharding

  def check_single_source(self) -> None:
    """Fails when the values came from two different meshes: the model
    then holds meshes on purpose, which the shim cannot map."""
    if len(self.foreign) > 1:
      paths = ", ".join(self.foreign.values())
      raise ValueError(
          f"The model holds {len(self.foreign)} different meshes (first met"
          f" at {paths}); the shim rebinds a model built on one mesh only."
      )


def _path_name(path: tuple[Any, ...]) -> str:
  return ".".join(str(key) for key in path) or "<root>"


def rebind_meshes(model: nnx.Module, mesh: Mesh) -> int:
  """Rebinds every static mesh reference of `model` to `mesh`, in place.

  In every graph node and `Variable`'s metadata, also inside partials,
  tuples, lists and dicts: each concrete `Mesh` becomes `mesh`, each
  `NamedSharding` one on `mesh`. Returns how many were replaced; a mesh it
  cannot map fails, naming its path, before anything changes.
  """
  rebinder, updates = _rebinds(model, mesh)
  for setter, name, new in updates:
    setter(name, new)
  logging.info(
      "Rebound %d static mesh references onto the mesh over devices %s.",
      rebinder.count,
      [d.id for d in mesh.devices.flat],
  )
  return rebinder.count


def _rebinds(model: nnx.Module, mesh: Mesh) -> tuple[_Rebinder, list[Any]]:
  """`rebind_meshes`'s plan: `(rebinder, [(setter, name, new value)])`."""
  rebinder = _Rebinder(mesh)
  updates = []
  for path, node in nnx.graph.iter_graph(model):
    if isinstance(node, nnx.Variable):
      for key, value in node.get_metadata().items():
        where = f"{_path_name(path)}.metadata[{key!r}]"
        new = rebinder(value, where)
        if new is not value:
          updates.append((node.set_metadata, key, new))
    elif isinstance(node, nnx.Pytree):
      for name, value in vars(node).items():
        if name in _NNX_BOOKKEEPING or nnx.graph.is_graph_node(value):
          continue
        new = rebinder(value, _path_name(path + (name,)))
        if new is not value:
          updates.append((functools.partial(setattr, node), name, new))
  rebinder.check_single_source()
  return rebinder, updates


def rebind_keywords(
    keywords: Mapping[str, Any], mesh: Mesh
) -> tuple[dict[str, Any], int]:
  """`(keywords rebound to mesh, values replaced)`, as `rebind_meshes`."""
  rebinder = _Rebinder(mesh)
  rebound = {
      name: rebinder(value, f"keyword {name!r}")
      for name, value in keywords.items()
  }
  rebinder.check_single_source()
  return rebound, rebinder.count


def _shardings(state: nnx.State, mesh: Mesh):
  """Each leaf's `NamedSharding(mesh, its spec)` in the default memory."""
  memory_kind = mesh.devices.flat[0].default_memory().kind
  return jax.tree.map(
      lambda spec: NamedSharding(
          mesh, spec or PartitionSpec(), memory_kind=memory_kind
      ),
      nnx.get_partition_spec(state),
  )


def is_placed(model: nnx.Module, mesh: Mesh) -> bool:
  """Whether `model` already sits on `mesh` (itself, not merely its
  devices) as `place_on_mesh` puts it. Raises as `rebind_meshes`."""
  state = nnx.state(model)
  placed = jax.tree.map(
      lambda x, s: isinstance(x, jax.Array)
      and getattr(x.sharding, "mesh", None) == mesh
      and x.sharding.is_equivalent_to(s, x.ndim),
      state,
      _shardings(state, mesh),
  )
  return all(jax.tree.leaves(placed)) and not _rebinds(model, mesh)[1]


def place_on_mesh(
    model: nnx.Module, mesh: Mesh, *, copy: bool = True
) -> nnx.Module:
  """`model` on `mesh` (`model` left as it was): every `Variable` moved
  device to device to `NamedSharding(mesh, its partition spec)`, then its
  meshes rebound (`rebind_meshes`); call it before anything jits the model.
  `copy` gives the result its own buffers even where a leaf already sits on
  its target: Tunix syncs weights only into a rollout sharing no leaf.
  """
  graphdef, state = nnx.split(model)
  moved = compat.reshard_pytree(state, _shardings(state, mesh))
  if copy:
    moved = jax.tree.map(
        lambda new, old: new.copy() if new is old else new, moved, state
    )
  placed = nnx.merge(graphdef, moved)
  rebind_meshes(placed, mesh)
  return placed


def _copies(tree):
  return jax.tree.map(jnp.copy, tree)  # New buffers, never the inputs.


_fresh_copy = jax.jit(_copies)  # On their own shardings, in one call.


def _staging(
    sharding: jax.sharding.Sharding, shape: tuple[int, ...], parts: int
) -> jax.sharding.NamedSharding:
  """`sharding`'s devices holding a leaf in `parts` pieces, split along
  its first dimension that `parts` divides (replicated if none)."""
  devices = sorted(sharding.device_set, key=lambda d: d.id)
  mesh = jax.sharding.Mesh(
      np.array(devices).reshape(-1, parts), ("copies", "parts")
  )
  dim = next((i for i, n in enumerate(shape) if n % parts == 0), None)
  spec = () if dim is None else (None,) * dim + ("parts",)
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))


def copy_params(params, target):
  """Fresh copies of `params` (the actor's filtered state) placed as
  `target`'s leaves (the rollout's state), device to device.

  JAX skips the host only where each destination shard is a shard the
  source holds (Tunix's `sync_weights` forbids host transfers on CPU), so
  each leaf is resharded on its own devices into `gcd(source devices,
  target devices)` pieces, copied across as such, then resharded.
  """
  placed_alike = jax.tree.map(
      lambda a, b: a.sharding.is_equivalent_to(b.sharding, a.ndim),
      params,
      target,
  )
  if all(jax.tree.leaves(placed_alike)):
    # Placed alike (the same devices, e.g. another mesh over them): one
    # compiled copy, so the rollout never shares (or loses, to donation)
    # the actor's arrays; Tunix's reshard would return them as they are,
    # after starting a logging thread.
    return _fresh_copy(params)
  parts = jax.tree.map(
      lambda a, b: math.gcd(
          len(a.sharding.device_set), len(b.sharding.device_set)
      ),
      params,
      target,
  )

  out = lambda tree: jax.tree.map(
      lambda x, k: _staging(x.sharding, x.shape, k), tree, parts
  )

  staged = jax.jit(_copies, out_shardings=out(params))(params)
  moved = compat.reshard_pytree(staged, out(target))
  shardings = jax.tree.map(lambda x: x.sharding, target)
  return jax.jit(_copies, out_shardings=shardings)(moved)
