# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The sampler-role shim on 8 CPU devices: actor on 0-3, sampler on 4-7.

The regression model holds the mesh every way a model can: a direct `Mesh`,
a `NamedSharding` field, `with_sharding_constraint` partials (keyword, under
a private name, and positional), a dict-held `Mesh`, and a wrapper module
around a block. Resharding its variables alone leaves the forward compiled
against the actor's devices; the shim makes it run on the sampler's.
"""

from tunix_bd_tests import multi_device

if __name__ == "__main__":  # Run alone; under pytest, multi_device_test.
  multi_device.request(8)

# pylint: disable=g-import-not-at-top,g-bad-import-order
import functools

from absl.testing import absltest
from flax import nnx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np
from tunix_bd.models import lora
from tunix_bd.rl import role_shim
from tunix_bd_tests import test_common

_NUM_DEVICES = 8
_AXES = ("fsdp", "tp")


def _mesh(device_ids, axes=_AXES) -> Mesh:
  devices = [jax.devices()[i] for i in device_ids]
  return Mesh(np.asarray(devices).reshape(len(devices), 1), axes)


def _constrain(shardings, x):
  return jax.lax.with_sharding_constraint(x, shardings)


class _Block(nnx.Module):
  """A dense layer holding its mesh in the five ways of the seed's models."""

  MESH_LEAVES = 5  # mesh, out_sharding, _shard, _shard_positional, meshes.

  def __init__(self, mesh: Mesh, seed: int):
    rng = np.random.default_rng(seed)
    self.kernel = nnx.Param(
        jnp.asarray(rng.normal(size=(8, 8)), jnp.float32),
        sharding=("fsdp", None),
    )
    self.mesh = mesh
    self.out_sharding = NamedSharding(mesh, P("fsdp", None))
    self._shard = functools.partial(
        jax.lax.with_sharding_constraint,
        shardings=NamedSharding(mesh, P("fsdp", None)),
    )
    self._shard_positional = functools.partial(
        _constrain, NamedSharding(mesh, P(None, None))
    )
    self.meshes = {"compute": mesh}

  def __call__(self, x):
    x = self._shard(x @ self.kernel[...])
    x = jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, P("fsdp")))
    x = self._shard_positional(x)
    x = jax.lax.with_sharding_constraint(
        x, NamedSharding(self.meshes["compute"], P())
    )
    return jax.lax.with_sharding_constraint(jnp.tanh(x), self.out_sharding)


class _Wrapper(nnx.Module):
  """MaxText's `_MeshConstrainedWrapper` shape: a partial around a block."""

  MESH_LEAVES = 1

  def __init__(self, block: _Block, mesh: Mesh):
    self.block = block
    self._shard = functools.partial(
        jax.lax.with_sharding_constraint,
        shardings=NamedSharding(mesh, P("fsdp")),
    )

  def __call__(self, x):
    return self._shard(self.block(x))


class _Toy(nnx.Module):
  MESH_LEAVES = 2 * _Block.MESH_LEAVES + _Wrapper.MESH_LEAVES

  def __init__(self, mesh: Mesh):
    self.layers = nnx.List([_Wrapper(_Block(mesh, 0), mesh), _Block(mesh, 1)])

  def __call__(self, x):
    for layer in self.layers:
      x = layer(x)
    return x


@jax.jit
def _forward(graphdef, state, x):
  return nnx.merge(graphdef, state)(x)


def _reshard_variables(model, mesh):
  """What Tunix does for a role mesh: moves the `Variable`s, nothing else."""
  state = nnx.state(model)
  shardings = nnx.get_named_sharding(state, mesh)
  nnx.update(model, jax.device_put(state, shardings))


def _rebind_direct_meshes(model, mesh) -> int:
  """The incomplete binder of the seed: direct `Mesh` attributes only."""
  count = 0
  for _, node in nnx.graph.iter_graph(model):
    if isinstance(node, nnx.Module):
      for name, value in list(vars(node).items()):
        if isinstance(value, Mesh) and value != mesh:
          setattr(node, name, mesh)
          count += 1
  return count


def _buffers(tree) -> set[int]:
  return {
      shard.data.unsafe_buffer_pointer()
      for leaf in jax.tree.leaves(tree)
      for shard in leaf.addressable_shards
  }


def _assert_trees_equal(test, got, want):
  test.assertEqual(jax.tree.structure(got), jax.tree.structure(want))
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


class RoleShimTest(multi_device.DeviceTestCase):
  NUM_DEVICES = _NUM_DEVICES

  def setUp(self):
    super().setUp()
    self.actor = _mesh(range(4))
    self.sampler = _mesh(range(4, 8))
    self.x = jnp.asarray(
        np.random.default_rng(9).normal(size=(8, 8)), jnp.float32
    )

  def test_regression_direct_binder_fails_shim_runs_on_sampler(self):
    want = _forward(*nnx.split(_Toy(self.actor)), self.x)
    x = jax.device_put(self.x, NamedSharding(self.sampler, P("fsdp")))

    model = _Toy(self.actor)
    _reshard_variables(model, self.sampler)
    self.assertEqual(_rebind_direct_meshes(model, self.sampler), 2)
    with self.assertRaisesRegex(ValueError, "incompatible devices"):
      _forward(*nnx.split(model), x)

    self.assertEqual(
        role_shim.rebind_meshes(model, self.sampler),
        _Toy.MESH_LEAVES - 2,  # The direct meshes were already rebound.
    )
    got = _forward(*nnx.split(model), x)
    self.assertEqual(test_common.device_ids(got), [4, 5, 6, 7])
    np.testing.assert_allclose(got, want, rtol=1e-6)

  def test_counts_params_specs_and_idempotence(self):
    model = _Toy(self.actor)
    _reshard_variables(model, self.sampler)
    state_before = nnx.state(model)
    values_before = jax.tree.map(np.asarray, state_before)
    specs_before = nnx.get_partition_spec(state_before)

    self.assertEqual(
        role_shim.rebind_meshes(model, self.sampler), _Toy.MESH_LEAVES
    )
    state_after = nnx.state(model)
    _assert_trees_equal(self, state_after, values_before)
    self.assertEqual(nnx.get_partition_spec(state_after), specs_before)
    self.assertEqual(role_shim.rebind_meshes(model, self.sampler), 0)

    block = model.layers[1]
    self.assertIs(block.mesh, self.sampler)
    self.assertIs(block.meshes["compute"], self.sampler)
    self.assertEqual(block.out_sharding.mesh, self.sampler)
    self.assertEqual(block.out_sharding.spec, P("fsdp", None))
    self.assertEqual(block._shard.keywords["shardings"].mesh, self.sampler)
    self.assertEqual(block._shard_positional.args[0].mesh, self.sampler)
    self.assertEqual(
        model.layers[0]._shard.keywords["shardings"].spec, P("fsdp")
    )

  def test_memory_kind_and_variable_metadata_are_rebound(self):
    class Holder(nnx.Module):

      def __init__(self, mesh):
        self.w = nnx.Param(jnp.ones((4,)), mesh=mesh)
        self.host = (NamedSharding(mesh, P(), memory_kind="pinned_host"),)

    model = Holder(self.actor)
    self.assertEqual(role_shim.rebind_meshes(model, self.sampler), 2)
    self.assertIs(model.w.get_metadata("mesh"), self.sampler)
    self.assertEqual(model.host[0].memory_kind, "pinned_host")
    self.assertEqual(model.host[0].mesh, self.sampler)

  def test_place_on_mesh_copies_onto_the_sampler_devices(self):
    model = _Toy(self.actor)
    _reshard_variables(model, self.actor)
    state = nnx.state(model)
    placed = role_shim.place_on_mesh(model, self.sampler, copy=True)

    placed_state = nnx.state(placed)
    self.assertEqual(test_common.device_ids(placed_state), [4, 5, 6, 7])
    _assert_trees_equal(self, placed_state, state)
    self.assertEqual(
        nnx.get_partition_spec(placed_state), nnx.get_partition_spec(state)
    )
    self.assertEqual(role_shim.rebind_meshes(placed, self.sampler), 0)
    self.assertTrue(role_shim.is_placed(placed, self.sampler))
    self.assertTrue(role_shim.is_placed(model, self.actor))
    self.assertFalse(role_shim.is_placed(model, self.sampler))
    # The actor's devices alike, but another mesh: Tunix's roles differ.
    other = Mesh(self.actor.devices, ("fsdp", "other"))
    self.assertFalse(role_shim.is_placed(model, other))
    x = jax.device_put(self.x, NamedSharding(self.sampler, P("fsdp")))
    got = _forward(*nnx.split(placed), x)
    self.assertEqual(test_common.device_ids(got), [4, 5, 6, 7])
    # The source model is untouched.
    self.assertEqual(test_common.device_ids(nnx.state(model)), [0, 1, 2, 3])
    self.assertIs(model.layers[1].mesh, self.actor)

  def test_place_on_the_same_mesh_owns_its_buffers_only_with_copy(self):
    model = _Toy(self.actor)
    _reshard_variables(model, self.actor)
    state = nnx.state(model)
    copied = nnx.state(role_shim.place_on_mesh(model, self.actor, copy=True))
    self.assertEmpty(_buffers(copied) & _buffers(state))
    _assert_trees_equal(self, copied, state)
    shared = nnx.state(role_shim.place_on_mesh(model, self.actor, copy=False))
    self.assertEqual(_buffers(shared), _buffers(state))

  def test_copy_runs_under_cpu_sync_transfer_guards(self):
    model = _Toy(self.actor)
    _reshard_variables(model, self.actor)
    with jax.transfer_guard_device_to_host("disallow_explicit"):
      with jax.transfer_guard_host_to_device("disallow_explicit"):
        for mesh in (self.actor, self.sampler):
          placed = role_shim.place_on_mesh(model, mesh, copy=True)
          jax.block_until_ready(nnx.state(placed))

  def test_rollout_partial_keywords(self):
    keywords = dict(
        data_sharding=NamedSharding(self.actor, P("fsdp")),
        meshes=[self.actor, "unrelated"],
        block_size=4,
    )
    rebound, count = role_shim.rebind_keywords(keywords, self.sampler)
    self.assertEqual(count, 2)
    self.assertEqual(rebound["data_sharding"].mesh, self.sampler)
    self.assertEqual(rebound["meshes"], [self.sampler, "unrelated"])
    self.assertEqual(rebound["block_size"], 4)
    self.assertIs(keywords["meshes"][0], self.actor)  # Input untouched.
    self.assertEqual(role_shim.rebind_keywords(rebound, self.sampler)[1], 0)
    other = _mesh(range(4), ("data", "model"))
    with self.assertRaisesRegex(ValueError, "keyword 'mesh'"):
      role_shim.rebind_keywords(dict(mesh=other), self.sampler)

  def test_tunix_qwen3_with_and_without_lora_rebinds_nothing(self):
    model = test_common.tiny_qwen3()
    lora_model = lora.apply_lora(test_common.tiny_qwen3(), rank=2, alpha=4.0)
    for name, source in (("plain", model), ("lora", lora_model)):
      with self.subTest(name):
        self.assertEqual(role_shim.rebind_meshes(source, self.sampler), 0)
        placed = role_shim.place_on_mesh(source, self.sampler)
        self.assertEqual(
            test_common.device_ids(nnx.state(placed)), [4, 5, 6, 7]
        )
        _assert_trees_equal(self, nnx.state(placed), nnx.state(source))
    self.assertNotEmpty(nnx.state(placed, nnx.LoRAParam))

  def test_different_axis_names_fail_closed_naming_the_path(self):
    model = _Toy(self.actor)
    other = _mesh(range(4, 8), ("data", "model"))
    with self.assertRaisesRegex(
        ValueError, r"layers\.0\.block\.mesh holds a mesh with axes"
    ):
      role_shim.rebind_meshes(model, other)
    self.assertIs(model.layers[0].block.mesh, self.actor)  # Nothing changed.
    self.assertIs(model.layers[1].mesh, self.actor)

  def test_spec_naming_a_missing_axis_fails_closed(self):
    class Holder(nnx.Module):

      def __init__(self, sharding):
        self._cache = {"kv": functools.partial(_constrain, sharding)}

    sequence_mesh = _mesh(range(4), ("fsdp", "sp"))
    model = Holder(NamedSharding(sequence_mesh, P("sp")))
    with self.assertRaisesRegex(
        ValueError, r"_cache\['kv'\]\.args\[0\].*\['sp'\]"
    ):
      role_shim.rebind_meshes(model, self.sampler)

  def test_a_sharding_without_a_mesh_off_the_target_fails_closed(self):
    class Holder(nnx.Module):

      def __init__(self, sharding):
        self.placement = {"cache": sharding}

    on_sampler = Holder(jax.sharding.SingleDeviceSharding(jax.devices()[5]))
    self.assertEqual(role_shim.rebind_meshes(on_sampler, self.sampler), 0)
    on_actor = Holder(jax.sharding.SingleDeviceSharding(jax.devices()[1]))
    with self.assertRaisesRegex(
        ValueError,
        r"placement\['cache'\] is a SingleDeviceSharding on devices \[1\]",
    ):
      role_shim.rebind_meshes(on_actor, self.sampler)

  def test_two_source_meshes_fail_closed(self):
    class Holder(nnx.Module):

      def __init__(self, first, second):
        self.first, self.second = first, second

    model = Holder(self.actor, _mesh(range(2, 6)))
    with self.assertRaisesRegex(ValueError, "2 different meshes"):
      role_shim.rebind_meshes(model, self.sampler)
    self.assertIs(model.first, self.actor)


if __name__ == "__main__":
  absltest.main()
