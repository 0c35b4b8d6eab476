# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""JAX random keys of one fixed implementation: the project's one RNG rule.

Every JAX draw tunix_bd makes (rollout sampling, model and LoRA
initialisation) starts from `key(seed)` here, never from `jax.random.key`,
`PRNGKey` or `nnx.Rngs(int)`, which follow the process-wide
`jax_default_prng_impl`. Under "rbg" or "unsafe_rbg" (common on TPU) a
vmapped draw is not a function of its seed alone, so a row's samples would
change with its batch mates, and a compiled function keeps whichever
implementation was active when first traced. A typed threefry2x32 key
carries its implementation, and its vmapped draws are per-row. The NumPy
streams (data order, corruption, prompt streams) do not depend on it.
"""

from __future__ import annotations

from flax import nnx
import jax

# The implementation of every key tunix_bd makes.
IMPL = "threefry2x32"


def key(seed: int | jax.Array) -> jax.Array:
  """The typed `IMPL` key of `seed` (an int or a uint32 scalar; traceable)."""
  return jax.random.key(seed, impl=IMPL)


def keys(seeds: jax.Array) -> jax.Array:
  """`[batch]` typed `IMPL` keys of uint32 `[batch]` per-row seeds."""
  return jax.vmap(key)(seeds)


def rngs(seed: int) -> nnx.Rngs:
  """`nnx.Rngs` whose default stream is `key(seed)` (model initialisation)."""
  return nnx.Rngs(key(seed))
