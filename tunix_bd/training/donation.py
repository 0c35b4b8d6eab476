# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Tunix trainer step that updates the weights in place, and its placement.

google-tunix 0.1.7's `PeftTrainer` jits its train step donating only the
optimizer (old and new float32 weights coexist at the step's peak), its eval
step without donation (a copy of the weights per evaluation), and places the
optimizer state with an eager `with_sharding_constraint` (two copies of the
AdamW moments before the first step).

`DonatingStepMixin`, mixed in before a `PeftTrainer` subclass, jits the same
steps donating the model too (full fine-tuning only; LoRA keeps Tunix's
steps) and places the optimizer state with `jax.device_put`, which moves only
leaves not already where their sharding says. Every step argument before
`inputs` (Tunix main's `grad_accumulator` included) is the trainer's
attribute of that name, bound and donated. On a Tunix whose trainer is
shaped otherwise (no `_jitted_train_step_fn`, or a step not taking `model,
optimizer, ..., inputs`), Tunix's own methods run unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from flax import nnx
import jax
from jax.interpreters import pxla
from tunix_bd import compat


class DonatingStepMixin:
  """Mixed in before a Tunix `PeftTrainer` subclass (see the module doc)."""

  def donates_model(self) -> bool:
    """Whether the jitted train step updates the weights in place."""
    return (
        not self._lora_enabled
        and compat.train_step_state_args(self) is not None
    )

  def jit_train_and_eval_step(
      self, skip_jit: bool = False, cache_nnx_graph: bool = False
  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Tunix's train and eval step functions, both donating the model (the
    train step the optimizer too) when `donates_model`."""
    if skip_jit or not self.donates_model():
      return super().jit_train_and_eval_step(skip_jit, cache_nnx_graph)
    if self._jitted_train_step_fn is None:
      self._shard_optimizer(pxla.thread_resources.env.physical_mesh)
      state = compat.train_step_state_args(self)
      train_step = nnx.jit(self.create_train_step_fn(), donate_argnames=state)
      # nnx.jit returns the model's state: undonated, a copy of the weights.
      eval_step = nnx.jit(self.create_eval_step_fn(), donate_argnames="model")

      def bind(f, *args):
        if cache_nnx_graph:
          # As Tunix: a partial of the cached partial, so that the jitted
          # function is reached the same way (`train_step.func.jitted_fn`).
          return functools.partial(nnx.cached_partial(f, *args))
        return functools.partial(f, *args)

      self._jitted_train_step_fn = bind(
          train_step, *(getattr(self, name) for name in state)
      )
      self._jitted_eval_step_fn = bind(eval_step, self.model)
    return self._jitted_train_step_fn, self._jitted_eval_step_fn

  def _shard_optimizer(self, mesh: jax.sharding.Mesh) -> None:
    """Places the optimizer state by its shardings, copying no leaf that is
    already placed (as Tunix's, so the train step compiles once)."""
    if mesh.empty:
      return
    state = nnx.state(self.optimizer, nnx.optimizer.OptState)
    shardings = nnx.get_named_sharding(state, mesh)
    nnx.update(self.optimizer, jax.device_put(state, shardings))
