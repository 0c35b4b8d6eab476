# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Global loss denominators under gradient accumulation.

Each micro-batch's weighted loss sum is scaled by `k / global_weight`, so k
accumulated micro-batches give exactly the global batch's gradient
(docs/design.md "Loss denominators"). Both fields are broadcast per row so
that every batch leaf is batch-major (Tunix shards every leaf on dim 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# float32 `[rows]`: the total loss weight of the whole global batch.
GLOBAL_WEIGHT = "global_weight"
# int32 `[rows]`: k, the micro-batches per global batch.
ACCUMULATION_STEPS = "accumulation_steps"


def batch_fields(
    global_weight: float, accumulation_steps: int, rows: int
) -> dict[str, np.ndarray]:
  """The two per-row fields of a micro-batch of `rows` rows."""
  return {
      GLOBAL_WEIGHT: np.full(rows, global_weight, np.float32),
      ACCUMULATION_STEPS: np.full(rows, accumulation_steps, np.int32),
  }


def loss_scale(
    global_weight: jax.Array, accumulation_steps: jax.Array
) -> jax.Array:
  """float32 scalar multiplying a micro-batch's weighted loss sum.

  `k / global_weight` (Tunix averages the k micro-batch gradients,
  `compat.ACCUMULATION_AVERAGES_GRADIENTS`); 0 for a global batch without
  weight.
  """
  # Every row of a micro-batch carries the same values; max is exact.
  denominator = jnp.max(global_weight).astype(jnp.float32)
  k = jnp.max(accumulation_steps).astype(jnp.float32)
  return jnp.where(denominator > 0, k / jnp.maximum(denominator, 1e-30), 0.0)
