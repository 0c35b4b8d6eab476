# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.training.hook_chain`: every callback, every hook."""

from absl.testing import absltest
from tunix.sft import hooks

from tunix_bd.training import hook_chain


class _Recorder(hooks.TrainingHooks):
  """Appends `(name, callback, args)` to a shared log."""

  def __init__(self, name: str, log: list):
    self.name, self.log = name, log

  def _record(self, callback, *args):
    self.log.append((self.name, callback, args))

  def on_train_start(self, train_ctx):
    self._record("on_train_start", train_ctx)

  def on_train_end(self, train_ctx):
    self._record("on_train_end", train_ctx)

  def on_train_step_start(self, train_ctx):
    self._record("on_train_step_start", train_ctx)

  def on_train_step_end(self, train_ctx, train_step, train_loss):
    self._record("on_train_step_end", train_ctx, train_step, train_loss)

  def on_eval_step_start(self, train_ctx):
    self._record("on_eval_step_start", train_ctx)

  def on_eval_step_end(self, train_ctx, eval_loss):
    self._record("on_eval_step_end", train_ctx, eval_loss)


class HookChainTest(absltest.TestCase):

  def test_each_callback_reaches_each_hook_in_order(self):
    log = []
    chain = hook_chain.HookChain(_Recorder("a", log), _Recorder("b", log))
    ctx = object()
    calls = [
        ("on_train_start", (ctx,)),
        ("on_train_step_start", (ctx,)),
        ("on_train_step_end", (ctx, 3, 0.5)),
        ("on_eval_step_start", (ctx,)),
        ("on_eval_step_end", (ctx, 0.25)),
        ("on_train_end", (ctx,)),
    ]
    for callback, args in calls:
      getattr(chain, callback)(*args)
    want = [(name, c, a) for c, a in calls for name in ("a", "b")]
    self.assertEqual(log, want)


if __name__ == "__main__":
  absltest.main()
