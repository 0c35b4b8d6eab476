# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one temperature-scaled log-softmax of every sampler and scorer.

Rollout commits and recorded log-probs (`generate.step`), replay
(`core.replay`), OPD and the losses all score target-aligned logits
(`diffusion_lm`) through `log_probs` / `token_log_probs`, so replay
reproduces a rollout's log-probs by construction. The mask token's logit
(`MASKED_LOGIT`) stays excluded at any temperature.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import masks

# The mask token's logit. Finite on purpose: -inf would make `0 * log p` and
# `inf - inf` NaN in losses and their gradients. In float32,
# exp(MASKED_LOGIT - max) is exactly 0 for any real max logit, and
# MASKED_LOGIT is far from the float32 limit (3.4e38).
MASKED_LOGIT = -1e30


def check_temperature(temperature: Any, name: str = "temperature") -> float:
  """A static temperature as a float; fails closed unless finite and > 0."""
  if isinstance(temperature, jax.core.Tracer):
    raise ValueError(
        f"{name} must be a static number, got a traced value; keep it out of"
        " jit arguments."
    )
  if isinstance(temperature, (np.ndarray, jax.Array)) and temperature.ndim:
    raise ValueError(f"{name} must be a scalar, got {temperature!r}.")
  try:
    value = float(temperature)
  except (TypeError, ValueError):
    value = float("nan")
  if isinstance(temperature, bool) or not 0.0 < value < float("inf"):
    raise ValueError(
        f"{name} must be a finite number > 0, got {temperature!r}."
    )
  return value


def scale_logits(logits: jax.Array, temperature: Any) -> jax.Array:
  """float32 logits divided by the temperature, excluded entries kept.

  Entries at or below `MASKED_LOGIT` (the mask token) stay at
  `MASKED_LOGIT` at any temperature, so their probability is exactly 0 and
  no value or gradient overflows. `temperature` is a finite number > 0,
  static (checked) or a traced scalar (checked by its config).
  """
  if not isinstance(temperature, jax.Array):
    temperature = check_temperature(temperature)
  logits = logits.astype(jnp.float32)
  excluded = logits <= jnp.float32(MASKED_LOGIT)
  return jnp.where(excluded, jnp.float32(MASKED_LOGIT), logits / temperature)


def log_probs(logits: jax.Array, temperature: Any = 1.0) -> jax.Array:
  """float32 `[..., vocab]` log-probabilities of `[..., vocab]` logits at
  `temperature`; the mask token's is `MASKED_LOGIT`-small (probability 0)."""
  return jax.nn.log_softmax(scale_logits(logits, temperature), axis=-1)


def token_log_probs(
    logits: jax.Array, targets: jax.Array, temperature: Any = 1.0
) -> jax.Array:
  """`log_probs(logits, temperature)` at `targets`, without `[..., vocab]` out.

  float32 `[batch, length]` of `[batch, length, vocab]` logits and int
  `[batch, length]` targets.
  """
  targets = masks.check_ids("targets", targets, logits.shape[:-1])
  scaled = scale_logits(logits, temperature)
  picked = jnp.take_along_axis(scaled, targets[..., None], axis=-1)[..., 0]
  return picked - jax.nn.logsumexp(scaled, axis=-1)
