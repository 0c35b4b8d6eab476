# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Progress lines for training runs whose output is not a terminal.

Tunix's `PeftTrainer` draws a tqdm progress bar only when stderr is a
terminal (or in IPython); `ProgressLines` is a Tunix `TrainingHooks` that
prints one line at most every `every_s` seconds (and at the first and last
step) when that bar is hidden:

  [SFT] step 200/1000 (20%)  loss 0.4312  eval loss 0.4020 masked acc 84.1%
  elapsed 2m31s  ETA 10m04s

Attach it with `trainer.with_training_hooks(ProgressLines(...))`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from tunix_bd import compat


def format_duration(seconds: float) -> str:
  """`95` -> `1m35s`, `3725` -> `1h02m05s`."""
  seconds = int(round(seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  if hours:
    return f"{hours}h{minutes:02d}m{secs:02d}s"
  if minutes:
    return f"{minutes}m{secs:02d}s"
  return f"{secs}s"


class ProgressLines(compat.TrainingHooks):
  """Prints step/max_steps, loss, the last eval metrics, elapsed and ETA."""

  def __init__(
      self,
      description: str,
      *,
      every_s: float = 30.0,
      enabled: bool | None = None,
      stream: TextIO | None = None,
      clock: Callable[[], float] = time.monotonic,
      latest: Sequence[tuple[str, str, str]] = (),
  ):
    """Builds the hook; `description` prefixes each line (e.g. "SFT").

    Args:
      every_s: the most seconds between two lines.
      enabled: None prints lines exactly when Tunix's progress bar is hidden
        (stderr is not a terminal).
      stream: where lines go; None is stdout, read at each line.
      clock: monotonic seconds (injectable for tests).
      latest: `(metrics prefix, name, label)` of train metrics whose latest
        value each line shows (e.g. RL's reward).
    """
    self._description = description
    self._every_s = every_s
    self._enabled = (
        not compat.tunix_progress_bar_visible() if enabled is None else enabled
    )
    self._stream = stream
    self._clock = clock
    self._start = self._last_line = 0.0
    # The first printed step and its time: the ETA's rate excludes the
    # first step, which compiles.
    self._first: tuple[int, float] | None = None
    self._eval: dict[str, float] = {}
    self._started = False
    self._latest = tuple(latest)
    self._ctx = None

  @property
  def enabled(self) -> bool:
    return self._enabled

  def on_train_start(self, train_ctx: Any):
    # RL learners call the trainer's `train` once per global step: time and
    # pace the whole run from its first call.
    if self._started:
      return
    self._started = True
    self._start = self._clock()
    self._last_line = -float("inf")
    self._first = None

  def _no_line(self, train_ctx: Any):
    del train_ctx

  on_train_end = on_train_step_start = on_eval_step_start = _no_line

  def on_eval_step_end(self, train_ctx: Any, eval_loss: Any):
    del eval_loss  # A sum over eval batches; the logger holds the mean.
    logger, prefix = train_ctx.metrics_logger, train_ctx.metrics_prefix
    self._eval = {
        name: float(logger.get_metric_history(prefix, name, "eval")[-1])
        for name in ("loss", "masked_accuracy")
        if logger.metric_exists(prefix, name, "eval")
    }

  def on_train_step_end(self, train_ctx: Any, train_step: int, train_loss):
    if not self._enabled or train_step is None:
      return
    now = self._clock()
    max_steps = train_ctx.config.max_steps
    is_last = max_steps is not None and train_step >= max_steps
    if self._first is None:
      self._first = (train_step, now)
    elif not is_last and now - self._last_line < self._every_s:
      return
    self._last_line, self._ctx = now, train_ctx
    text = self.line(train_step, max_steps, train_loss, now)
    print(text, file=self._stream, flush=True)

  def line(self, step: int, max_steps: int | None, loss, now: float) -> str:
    """The progress line of `step` at time `now`."""
    elapsed = now - self._start
    parts = [f"[{self._description}] step {step}"]
    if max_steps:
      parts[0] += f"/{max_steps} ({step / max_steps:.0%})"
    if loss is not None:
      parts.append(f"loss {float(np.asarray(loss)):.4f}")
    for prefix, name, label in self._latest:
      logger = getattr(self._ctx, "metrics_logger", None)
      if logger is not None and logger.metric_exists(prefix, name, "train"):
        value = logger.get_metric_history(prefix, name, "train")[-1]
        parts.append(f"{label} {float(value):.4f}")
    if "loss" in self._eval:
      evals = f"eval loss {self._eval['loss']:.4f}"
      if "masked_accuracy" in self._eval:
        evals += f" masked acc {self._eval['masked_accuracy']:.1%}"
      parts.append(evals)
    parts.append(f"elapsed {format_duration(elapsed)}")
    if max_steps and self._first and step > self._first[0]:
      rate = (now - self._first[1]) / (step - self._first[0])
      parts.append(f"ETA {format_duration(rate * max(max_steps - step, 0))}")
    return "  ".join(parts)
