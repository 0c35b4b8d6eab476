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
