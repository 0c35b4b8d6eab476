# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Config sections and presets that have no settings dataclass yet.

Sections with a dataclass are built from it (`config_utils.to_section`), the
one source of their defaults. Imported by `configs/*.py`, so it depends on
`ml_collections` alone.
"""

import ml_collections


def tiny_model_shape() -> dict[str, int]:
  """`model.scratch` fields that smoke variants shrink: 1 layer, 32 wide."""
  return dict(
      num_layers=1,
      embed_dim=32,
      hidden_dim=64,
      num_heads=2,
      head_dim=16,
      num_kv_heads=1,
  )


def mesh() -> ml_collections.ConfigDict:
  """The `mesh` section: `(fsdp, tp)` axes; `fsdp=-1` takes every device."""
  return ml_collections.ConfigDict(dict(fsdp=-1, tp=1))


def role_mesh() -> ml_collections.ConfigDict:
  """The RL `mesh` section: `mesh()` plus per-role device sets.

  `actor`, `reference` and `rollout` each take `devices` (a count, or a
  fraction of all devices) or `slices` (whole slices), and their own
  `fsdp`/`tp` (None: `mesh.fsdp`/`mesh.tp`). A role with neither shares the
  actor's mesh; the actor takes what the others leave. See `tunix_bd.rl.meshes`.
  """
  section = mesh()
  section.data_sharding_axes = ("fsdp",)
  section.disjoint = True
  for role in ("actor", "reference", "rollout"):
    section[role] = ml_collections.ConfigDict(
        dict(devices=None, slices=None, fsdp=None, tp=None)
    )
  return section
