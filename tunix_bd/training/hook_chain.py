# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Several Tunix `TrainingHooks` where a trainer takes one.

Tunix's `PeftTrainer.with_training_hooks` holds a single hooks object; OPD
runs its decode evaluation and the progress lines side by side.
"""

from __future__ import annotations

from typing import Any

from tunix_bd import compat


class HookChain(compat.TrainingHooks):
  """Calls each hook's callbacks in the order the hooks were given."""

  def __init__(self, *chained: compat.TrainingHooks):
    self.hooks = chained

  def on_train_start(self, train_ctx: Any):
    for hook in self.hooks:
      hook.on_train_start(train_ctx)

  def on_train_end(self, train_ctx: Any):
    for hook in self.hooks:
      hook.on_train_end(train_ctx)

  def on_train_step_start(self, train_ctx: Any):
    for hook in self.hooks:
      hook.on_train_step_start(train_ctx)

  def on_train_step_end(self, train_ctx: Any, train_step: int, train_loss):
    for hook in self.hooks:
      hook.on_train_step_end(train_ctx, train_step, train_loss)

  def on_eval_step_start(self, train_ctx: Any):
    for hook in self.hooks:
      hook.on_eval_step_start(train_ctx)

  def on_eval_step_end(self, train_ctx: Any, eval_loss: Any):
    for hook in self.hooks:
      hook.on_eval_step_end(train_ctx, eval_loss)
