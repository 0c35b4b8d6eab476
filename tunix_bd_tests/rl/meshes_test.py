# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Per-role meshes: the device split (on stand-in devices) and real meshes.

The split is checked on stand-in device records (ids, and slice indices in a
shuffled order, as a multi-slice TPU job lists them); the meshes themselves
on 8 CPU devices in a subprocess.
"""

from tunix_bd_tests import multi_device

if __name__ == "__main__":  # Run alone; under pytest, multi_device_test.
  multi_device.request(8)

# pylint: disable=g-import-not-at-top,g-bad-import-order
import collections
import dataclasses
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.models import sections
from tunix_bd.rl import meshes
from tunix_bd.rl import wiring
from tunix_bd.run import models
from tunix_bd_tests import test_common

_NUM_DEVICES = 8
_Device = collections.namedtuple("_Device", ["id"])
_SlicedDevice = collections.namedtuple("_SlicedDevice", ["id", "slice_index"])


def _section(**roles):
  """The RL `mesh` section with `roles` ({"rollout": {"devices": 4}})."""
  section = config_utils.to_section(mesh_lib.RoleMeshSettings)
  for role, values in roles.items():
    if isinstance(values, dict):
      for key, value in values.items():
        section[role][key] = value
    else:
      section[role] = values
  return section


def _settings(section):
  return meshes.role_settings(section)


def _tiny_grpo_model():
  """`grpo.py:tiny`'s `model` section: a random model 32 wide."""
  section = config_files.get_config("grpo", "tiny").model
  return config_utils.from_section(sections.GrpoModel, section, "model")


def _ids(assigned):
  return {role: [d.id for d in devices] for role, devices in assigned.items()}


def _assign(section, devices=None):
  devices = devices or [_Device(i) for i in range(_NUM_DEVICES)]
  settings = _settings(section)
  return _ids(meshes.assign_devices(settings, devices))


class AssignDevicesTest(parameterized.TestCase):

  def test_a_section_without_roles_is_one_shared_set(self):
    want = {"actor": list(range(8))}
    self.assertEqual(
        _assign(config_utils.to_section(mesh_lib.MeshSettings)), want
    )
    self.assertEqual(
        _assign(config_utils.to_section(mesh_lib.RoleMeshSettings)), want
    )

  @parameterized.named_parameters(
      ("count", 4, [4, 5, 6, 7]), ("fraction", 0.25, [6, 7])
  )
  def test_rollout_takes_the_last_devices(self, devices, want):
    self.assertEqual(
        _assign(_section(rollout=dict(devices=devices))),
        {"actor": list(range(8 - len(want))), "rollout": want},
    )

  def test_reference_follows_the_actor(self):
    section = _section(reference=dict(devices=2), rollout=dict(devices=2))
    self.assertEqual(
        _assign(section),
        {"actor": [0, 1, 2, 3], "reference": [4, 5], "rollout": [6, 7]},
    )
    section.actor.devices = 2
    self.assertEqual(
        _assign(section),
        {"actor": [0, 1], "reference": [2, 3], "rollout": [6, 7]},
    )

  def test_whole_slices_in_slice_order(self):
    # 4 slices of 2 devices, listed out of slice order.
    order = [3, 0, 2, 1]
    devices = [
        _SlicedDevice(id=2 * s + k, slice_index=s)
        for s in order
        for k in (0, 1)
    ]
    self.assertEqual(
        _assign(_section(rollout=dict(slices=1)), devices),
        {"actor": [0, 1, 2, 3, 4, 5], "rollout": [6, 7]},
    )
    self.assertEqual(
        _assign(
            _section(actor=dict(slices=1), rollout=dict(slices=2)), devices
        ),
        {"actor": [0, 1], "rollout": [4, 5, 6, 7]},
    )

  def test_overlap_only_when_disjoint_is_off(self):
    section = _section(actor=dict(devices=6), rollout=dict(devices=4))
    with self.assertRaisesRegex(
        ValueError, r"mesh.actor and mesh.rollout share devices \[4, 5\]"
    ):
      _assign(section)
    section.disjoint = False
    self.assertEqual(
        _assign(section), {"actor": [0, 1, 2, 3, 4, 5], "rollout": [4, 5, 6, 7]}
    )
    section = _section(actor=dict(devices=1.0), rollout=dict(devices=1.0))
    section.disjoint = False
    self.assertEqual(
        _assign(section), {"actor": list(range(8)), "rollout": list(range(8))}
    )

  @parameterized.named_parameters(
      ("too_many", dict(rollout=dict(devices=16)), "mesh.rollout.devices = 16"),
      ("zero", dict(rollout=dict(devices=0)), "mesh.rollout.devices must be"),
      ("bool", dict(rollout=dict(devices=True)), "mesh.rollout.devices must"),
      (
          "tiny_fraction",
          dict(rollout=dict(devices=0.05)),
          "leaves mesh.rollout no devices",
      ),
      ("fraction_over_1", dict(rollout=dict(devices=1.5)), "in \\(0, 1\\]"),
      (
          "actor_left_empty",
          dict(reference=dict(devices=4), rollout=dict(devices=4)),
          "mesh.actor gets no devices",
      ),
      (
          "actor_and_reference_too_many",
          dict(actor=dict(devices=6), reference=dict(devices=4)),
          "mesh.actor and mesh.reference take 10 of the 8",
      ),
      (
          "slices_without_slice_index",
          dict(rollout=dict(slices=1)),
          "mesh.rollout.slices needs devices with a slice_index",
      ),
      (
          "both",
          dict(rollout=dict(devices=2, slices=1)),
          "mesh.rollout.devices or mesh.rollout.slices",
      ),
      (
          "axes_without_devices",
          dict(rollout=dict(tp=2)),
          r"mesh\.rollout\.tp is set, but mesh\.rollout has no devices of its"
          r" own \(it shares mesh\.actor's mesh\)",
      ),
      (
          "typo",
          dict(rollout=dict(device=2)),
          r"unknown mesh.rollout config keys \['device'\]",
      ),
      (
          "unknown_data_axis",
          dict(data_sharding_axes=("dp",)),
          r"mesh.data_sharding_axes names \['dp'\]",
      ),
  )
  def test_bad_sections_fail_naming_the_key(self, roles, message):
    with self.assertRaisesRegex(ValueError, message):
      section = config_utils.to_section(mesh_lib.RoleMeshSettings)
      for key, value in roles.items():
        if isinstance(value, dict):
          section[key] = dict(section[key].to_dict(), **value)
        else:
          section[key] = value
      _assign(section)

  def test_more_slices_than_there_are(self):
    devices = [_SlicedDevice(i, i // 2) for i in range(8)]
    with self.assertRaisesRegex(ValueError, "mesh.rollout.slices = 5 is more"):
      _assign(_section(rollout=dict(slices=5)), devices)

  def test_multi_controller_is_rejected(self):
    with mock.patch.object(jax, "process_count", return_value=2):
      with self.assertRaisesRegex(ValueError, "single controller.* 2 proc"):
        meshes.build(_section(rollout=dict(devices=4)))


class RlMeshSectionTest(absltest.TestCase):

  def test_the_rl_section_is_the_mesh_section_and_the_role_keys(self):
    section = config_utils.to_section(mesh_lib.RoleMeshSettings)
    self.assertEqual(
        {k: section[k] for k in ("fsdp", "tp")},
        config_utils.to_section(mesh_lib.MeshSettings).to_dict(),
    )
    self.assertEqual(
        set(section),
        {f.name for f in dataclasses.fields(mesh_lib.RoleMeshSettings)},
    )
    with self.assertRaisesRegex(
        ValueError,
        r"^unknown mesh config keys \['rollout'\]; valid keys are"
        r" \['fsdp', 'tp'\]\.$",
    ):
      config_utils.from_section(
          mesh_lib.MeshSettings, {"rollout": {"devices": 4}}, "mesh"
      )

  def test_the_grpo_config_s_mesh_is_the_dataclass_s(self):
    config = config_files.get_config("grpo")
    self.assertEqual(
        config.mesh.to_dict(),
        config_utils.to_section(mesh_lib.RoleMeshSettings).to_dict(),
    )
    self.assertEqual(_settings(config.mesh), mesh_lib.RoleMeshSettings())

  def test_role_subsections_become_role_settings(self):
    section = _section(rollout=dict(devices=4, tp=2))
    settings = _settings(section)
    self.assertEqual(settings.rollout, mesh_lib.RoleSettings(devices=4, tp=2))
    self.assertEqual(settings.actor, mesh_lib.RoleSettings())
    # A typed section is taken as it is.
    self.assertIs(_settings(settings), settings)

  def test_a_role_s_optional_keys_take_command_line_ints(self):
    section = config_utils.to_section(mesh_lib.RoleMeshSettings)
    section.rollout.slices = 1
    section.rollout.tp = 2
    with self.assertRaises(TypeError):
      section.rollout.tp = "2"


class BuildTest(multi_device.DeviceTestCase):
  NUM_DEVICES = _NUM_DEVICES

  def test_disjoint_actor_and_rollout_meshes(self):
    section = _section(rollout=dict(devices=4, tp=2))
    built = meshes.build(section)
    self.assertEqual([d.id for d in built.actor.devices.flat], [0, 1, 2, 3])
    self.assertEqual(built.actor.shape, {"fsdp": 4, "tp": 1})
    self.assertEqual([d.id for d in built.rollout.devices.flat], [4, 5, 6, 7])
    self.assertEqual(built.rollout.shape, {"fsdp": 2, "tp": 2})
    self.assertIs(built.reference, built.actor)
    self.assertEqual(built.data_sharding_axes, ("fsdp",))
    self.assertEqual(set(built.actor.axis_types), {jax.sharding.AxisType.Auto})
    role_to_mesh = wiring.role_to_mesh(
        built.actor, built.reference, built.rollout
    )
    self.assertEqual(
        {role.name: mesh for role, mesh in role_to_mesh.items()},
        {
            "ACTOR": built.actor,
            "REFERENCE": built.actor,
            "ROLLOUT": built.rollout,
        },
    )

  def test_no_roles_is_the_recipes_shared_mesh(self):
    section = config_utils.to_section(mesh_lib.MeshSettings)
    built = meshes.build(section)
    self.assertEqual(built.actor, mesh_lib.from_section(section))
    self.assertIs(built.rollout, built.actor)
    self.assertIs(built.reference, built.actor)

  def test_role_axis_sizes_must_fit_its_devices(self):
    with self.assertRaisesRegex(
        ValueError, r"mesh.rollout.fsdp \* mesh.rollout.tp = 1 \* 2 .* 3"
    ):
      meshes.build(_section(rollout=dict(devices=3, tp=2)))
    with self.assertRaisesRegex(ValueError, "mesh.reference.tp must be"):
      meshes.build(_section(reference=dict(devices=2, tp=0)))

  def test_model_axes_checked_against_every_role(self):
    built = meshes.build(_section(rollout=dict(devices=4)))
    meshes.check_model_axes(test_common.tiny_qwen3(), built)

    class SequenceSharded(nnx.Module):

      def __init__(self):
        self.w = nnx.Param(jnp.ones((4, 4)), sharding=("sp", "fsdp"))

    with self.assertRaisesRegex(
        ValueError, r"name axes \['sp'\] that mesh.actor"
    ):
      meshes.check_model_axes(SequenceSharded(), built)
    # Before any weight is placed: 3 rollout devices cannot split a width
    # of 32 (JAX would say so only while placing the rollout's copy).
    built = meshes.build(
        _section(actor=dict(devices=4), rollout=dict(devices=3))
    )
    with self.assertRaisesRegex(
        ValueError,
        r"^mesh\.rollout \(\{'fsdp': 3, 'tp': 1\}\) cannot hold the model:"
        r" its embedder\.input_embedding of shape \(128, 32\) splits a"
        r" dimension of 32 over \['fsdp'\], 3 devices",
    ):
      meshes.check_model_axes(models.abstract(_tiny_grpo_model(), ""), built)


if __name__ == "__main__":
  absltest.main()
