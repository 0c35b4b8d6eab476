# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Which masked positions of a block a denoising step commits.

Every rule is a pure `jnp` function of per-position confidences and an
eligibility mask, each `[batch, block]`, returning a `bool[batch, block]`
commit mask, by the rules of docs/design.md "Denoising step" (forced
progress; ties to the lower index). `CommitSettings` is the rule and its
parameters as every decoding path takes them, checked: a rule with a new
parameter is a change to this module, and its test, alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Sequence

import jax
import jax.numpy as jnp
import numpy as np

THRESHOLD = "threshold"
TOP_K = "top_k"
FACTOR = "factor"
RULES = (THRESHOLD, TOP_K, FACTOR)


def is_int(value: Any) -> bool:
  """An int or NumPy integer, not a bool."""
  return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
  """A finite int or float (NumPy's too), not a bool."""
  return (
      isinstance(value, (int, float, np.integer, np.floating))
      and not isinstance(value, bool)
      and math.isfinite(value)
  )


# Each rule parameter: its type (an int is traced as int32, a float as
# float32), whether a value is valid, and what it must be.
PARAMETERS = {
    "threshold": (float, lambda v: 0.0 < v <= 1.0, "a number in (0, 1]"),
    "top_k": (int, lambda v: v >= 1, "an int >= 1"),
    "factor": (float, lambda v: v > 0, "a number > 0"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommitSettings:
  """Which rule commits a step's positions, and its parameters; checked.

  A subclass that is a config section names it in `SECTION`, and its errors
  name the key (`rollout.threshold: threshold must be ...`).

  Attributes:
    rule: one of `RULES`.
    threshold: tau of the `threshold` rule, in (0, 1].
    top_k: k of the `top_k` rule (positions per step, not a vocabulary
      filter), >= 1.
    factor: f of the `factor` rule, > 0.
  """

  SECTION: ClassVar[str] = ""

  rule: str = THRESHOLD
  threshold: float = 0.9
  top_k: int = 1
  factor: float = 1.0

  def __post_init__(self):
    self.check("rule", self.rule in RULES, f"one of {RULES}")
    for name, (kind, valid, want) in PARAMETERS.items():
      value = getattr(self, name)
      ok = (is_int if kind is int else is_number)(value) and valid(value)
      self.check(name, ok, want)
      object.__setattr__(self, name, kind(value))  # Equal settings are equal.

  def key(self, name: str) -> str:
    """How errors name field `name`: `SECTION.name`, or `name` alone."""
    return f"{self.SECTION}.{name}" if self.SECTION else name

  def check(self, name: str, ok: bool, want: str) -> None:
    """A ValueError unless `ok`: `name must be {want}, got {value!r}.`,
    under the section's key."""
    if not ok:
      prefix = f"{self.key(name)}: " if self.SECTION else ""
      raise ValueError(
          f"{prefix}{name} must be {want}, got {getattr(self, name)!r}."
      )

  def label(self) -> str:
    """How metrics and reports name decoding under these settings: the
    threshold alone (`0.5`) under the `threshold` rule, else the rule and
    its parameter (`top_k=2`, `factor=1.0`); `describe` words it."""
    return str(self.threshold) if self.rule == THRESHOLD else self.setting()

  def setting(self) -> str:
    """The rule and its parameter: `threshold=0.9`, `top_k=2`."""
    return f"{self.rule}={getattr(self, self.rule)}"  # Named as its rule.

  def sweep(self, thresholds: Sequence[float], **changes: Any) -> tuple:
    """These settings with `changes`, at each of `thresholds` under the
    `threshold` rule; else once, at the rule's own parameter: a threshold
    changes nothing another rule commits. Each is checked, and labelled by
    its `label`."""
    if self.rule != THRESHOLD:
      return (dataclasses.replace(self, **changes),)
    return tuple(
        dataclasses.replace(self, **changes, threshold=float(t))
        for t in thresholds
    )


def describe(label: str) -> str:
  """A `CommitSettings.label` in words: `threshold 0.5`, `top_k=2`."""
  return label if "=" in label else f"{THRESHOLD} {label}"


def confidence_ranks(confidence: jax.Array, eligible: jax.Array) -> jax.Array:
  """int32 `[batch, block]` ranks of eligible positions, 0 = most confident.

  Ties go to the lower index; ineligible positions rank after all eligible
  ones.
  """
  # A stable sort of `-confidence` keeps equal confidences in index order;
  # ineligible positions sort last.
  key = jnp.where(eligible, -confidence.astype(jnp.float32), jnp.inf)
  order = jnp.argsort(key, axis=-1, stable=True)
  return jnp.argsort(order, axis=-1).astype(jnp.int32)


def factor_commit(
    confidence: jax.Array, eligible: jax.Array, factor: float
) -> jax.Array:
  """The Fast-dLLM v1 factor rule.

  With the eligible confidences sorted c(1) >= c(2) >= ..., the n-th is
  committed while c(n) >= 1 - factor / (n + 1), i.e. the longest such
  prefix, and always at least the first. (Fast-dLLM's reference code also
  commits the last position when only it fails; this rule does not.)
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
    threshold: float = 0.9,
    top_k: int = 1,
    factor: float = 1.0,
) -> jax.Array:
  """bool `[batch, block]` commits of the rule named `rule` (static); a
  parameter not given takes `CommitSettings`' default."""
  if rule == THRESHOLD:
    commit = eligible & (confidence >= threshold)
    # At least one: the most confident eligible position if none qualifies.
    none = ~commit.any(axis=-1, keepdims=True)
    ranks = confidence_ranks(confidence, eligible)
    return commit | (none & eligible & (ranks == 0))
  if rule == TOP_K:
    return eligible & (confidence_ranks(confidence, eligible) < top_k)
  if rule == FACTOR:
    return factor_commit(confidence, eligible, factor)
  raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}.")
