# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Which masked positions of a block a denoising step commits.

Every rule is a pure `jnp` function of per-position confidences `[batch,
block]` (the max probability over the vocabulary without the mask token) and
an eligibility mask (the positions still masked in rows still decoding). It
returns a `bool[batch, block]` commit mask. A row with an eligible position
always commits at least one (forced progress); a row without commits none.
Ties between equal confidences go to the lower logical position, which is
the lower index: a block's positions are consecutive logical positions.

Rules (docs/design.md "Denoising step"):
  * `threshold`: every eligible position with confidence >= tau.
  * `top_k`: the k most confident eligible positions (all if fewer).
  * `factor` (Fast-dLLM v1): with the eligible confidences sorted
    c(1) >= c(2) >= ..., commit the n-th while c(n) >= 1 - f / (n + 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

THRESHOLD = "threshold"
TOP_K = "top_k"
FACTOR = "factor"
RULES = (THRESHOLD, TOP_K, FACTOR)


def confidence_ranks(confidence: jax.Array, eligible: jax.Array) -> jax.Array:
  """The rank of each eligible position by confidence, 0 = most confident.

  Args:
    confidence: float `[batch, block]`.
    eligible: bool `[batch, block]`.

  Returns:
    int32 `[batch, block]`: eligible positions ranked by descending
    confidence, ties by lower index; ineligible positions rank after all
    eligible ones.
  """
  # A stable sort of `-confidence` keeps equal confidences in index order;
  # ineligible positions sort last.
  key = jnp.where(eligible, -confidence.astype(jnp.float32), jnp.inf)
  order = jnp.argsort(key, axis=-1, stable=True)
  return jnp.argsort(order, axis=-1).astype(jnp.int32)


def _at_least_one(commit, ranks, eligible):
  """Adds the most confident eligible position to rows that commit none."""
  none = ~commit.any(axis=-1, keepdims=True)
  return commit | (none & eligible & (ranks == 0))


def threshold_commit(
    confidence: jax.Array, eligible: jax.Array, threshold: float
) -> jax.Array:
  """Commits every eligible position with confidence >= `threshold`.

  Args:
    confidence: float `[batch, block]`.
    eligible: bool `[batch, block]`.
    threshold: tau in (0, 1].

  Returns:
    bool `[batch, block]`; the single most confident eligible position if
    none qualifies.
  """
  ranks = confidence_ranks(confidence, eligible)
  commit = eligible & (confidence >= threshold)
  return _at_least_one(commit, ranks, eligible)


def top_k_commit(
    confidence: jax.Array, eligible: jax.Array, k: int
) -> jax.Array:
  """Commits the `k` most confident eligible positions (all if fewer).

  Args:
    confidence: float `[batch, block]`.
    eligible: bool `[batch, block]`.
    k: >= 1.

  Returns:
    bool `[batch, block]`.
  """
  return eligible & (confidence_ranks(confidence, eligible) < k)


def factor_commit(
    confidence: jax.Array, eligible: jax.Array, factor: float
) -> jax.Array:
  """The Fast-dLLM v1 factor rule.

  With the eligible confidences sorted c(1) >= c(2) >= ..., the n-th is
  committed while c(n) >= 1 - factor / (n + 1), i.e. the longest such
  prefix, and always at least the first. (Fast-dLLM's reference code also
  commits the last position when only it fails; this rule does not.)

  Args:
    confidence: float `[batch, block]`.
    eligible: bool `[batch, block]`.
    factor: f > 0.

  Returns:
    bool `[batch, block]`.
  """
  confidence = confidence.astype(jnp.float32)
  ranks = confidence_ranks(confidence, eligible)
  block = confidence.shape[-1]
  ordered = jnp.where(eligible, confidence, -jnp.inf)
  ordered = -jnp.sort(-ordered, axis=-1)  # Descending; ineligible last.
  n = jnp.arange(1, block + 1, dtype=jnp.float32)
  passes = ordered >= 1.0 - jnp.asarray(factor, jnp.float32) / (n + 1.0)
  count = jnp.sum(jnp.cumprod(passes, axis=-1), axis=-1, keepdims=True)
  return eligible & (ranks < jnp.maximum(count, 1))


def commit_mask(
    rule: str,
    confidence: jax.Array,
    eligible: jax.Array,
    *,
    threshold: float,
    top_k: int,
    factor: float,
) -> jax.Array:
  """Dispatches to the named rule (`rule` and its parameters are static).

  Args:
    rule: one of `RULES`.
    confidence: float `[batch, block]`.
    eligible: bool `[batch, block]`.
    threshold: the `threshold` rule's tau.
    top_k: the `top_k` rule's k.
    factor: the `factor` rule's f.

  Returns:
    bool `[batch, block]` commits.

  Raises:
    ValueError: for an unknown rule.
  """
  if rule == THRESHOLD:
    return threshold_commit(confidence, eligible, threshold)
  if rule == TOP_K:
    return top_k_commit(confidence, eligible, top_k)
  if rule == FACTOR:
    return factor_commit(confidence, eligible, factor)
  raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}.")
