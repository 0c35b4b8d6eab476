# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""JAX random keys of one fixed implementation: the project's one RNG rule.

Every JAX draw tunix_bd makes (rollout sampling, from-scratch model and LoRA
initialisation) starts from `key(seed)` here, never from `jax.random.key`,
`jax.random.PRNGKey` or `nnx.Rngs(int)`, which follow the process-wide
`jax_default_prng_impl`. Under "rbg" or "unsafe_rbg" (common on TPU) a draw
is not a function of its seed alone: vmapped over rows, a row's samples
change with its batch mates (so a row alone no longer equals the same row in
a batch), and since the default is not part of JAX's compile-cache key, a
compiled function keeps whichever implementation was active when it was
first traced. A typed key carries its implementation, so `fold_in`, `split`
and the samplers downstream follow it whatever the default; threefry2x32
(JAX's own default) is counter-based, so its vmapped draws are per-row.

The NumPy streams (data order, SFT/OPD corruption, prompt streams, GRPO
rollout seeds) do not depend on JAX's setting.
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
