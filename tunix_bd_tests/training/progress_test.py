# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.training.progress`: lines from a real Tunix run.

A tiny Qwen3 trains 5 steps with Tunix's `PeftTrainer` (stock AR loss) and
the hook attached; an injected clock advancing 20 s per reading makes which
steps print, their elapsed time and ETA exact.
"""

import io
import itertools

from absl.testing import absltest
import optax
from tunix.sft import peft_trainer

from tunix_bd import compat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.training import ar
from tunix_bd.training import progress
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()


def _train(hook: progress.ProgressLines, max_steps: int = 5) -> None:
  mix = tasks_lib.TaskMix(tasks=("sort",), min_len=1, max_len=3, seed=0)
  data = {
      split: dataset_lib.tokenize(
          _TOKENIZER, dataset_lib.embedded_conversations(mix, split, 16), 40
      )
      for split in ("train", "eval")
  }
  model = test_common.init_qwen3(
      test_common.tiny_qwen3_config(len(_TOKENIZER)), seed=0, scale=0.05
  )
  trainer = peft_trainer.PeftTrainer(
      model,
      optax.adamw(1e-3),
      peft_trainer.TrainingConfig(eval_every_n_steps=2, max_steps=max_steps),
  )
  trainer.with_gen_model_input_fn(ar.ar_model_inputs)
  trainer.with_training_hooks(hook)
  trainer.train(
      dataset_lib.batches(data["train"], 4, seed=0),
      dataset_lib.batches(data["eval"], 8, seed=0, num_epochs=1, shuffle=False),
  )


class ProgressLinesTest(absltest.TestCase):

  def test_prints_first_last_and_every_30_seconds_with_eta(self):
    stream = io.StringIO()
    clock = itertools.count(0.0, 20.0).__next__  # 0 at train start.
    hook = progress.ProgressLines(
        "AR", every_s=30, enabled=True, stream=stream, clock=clock
    )
    _train(hook)
    lines = stream.getvalue().splitlines()
    # Steps end at 20, 40, 60, 80, 100 s: step 1 (first), 3 (40 s after
    # the last line) and 5 (last) print.
    self.assertLen(lines, 3, lines)
    self.assertRegex(lines[0], r"^\[AR\] step 1/5 \(20%\)  loss \d+\.\d{4}")
    self.assertIn("elapsed 20s", lines[0])
    self.assertNotIn("ETA", lines[0])  # No rate from one (compiling) step.
    self.assertTrue(lines[1].startswith("[AR] step 3/5 (60%)"))
    # 40 s for steps 1 -> 3: 20 s a step, 2 steps left.
    self.assertIn("elapsed 1m00s  ETA 40s", lines[1])
    self.assertTrue(lines[2].startswith("[AR] step 5/5 (100%)"))
    self.assertIn("ETA 0s", lines[2])
    # Evaluations ran at steps 0, 2 and 4: every line shows the latest.
    for line in lines:
      self.assertRegex(line, r"  eval loss \d+\.\d{4}  ")

  def test_disabled_prints_nothing_and_default_follows_the_bar(self):
    stream = io.StringIO()
    _train(progress.ProgressLines("AR", enabled=False, stream=stream), 2)
    self.assertEmpty(stream.getvalue())
    hook = progress.ProgressLines("AR", stream=stream)
    self.assertEqual(hook.enabled, not compat.tunix_progress_bar_visible())

  def test_one_run_over_many_train_calls_and_latest_metrics(self):
    # RL learners call `train` once per global step; the run is timed and
    # paced from its first call, and lines show the latest reward.
    clock = iter([0.0, 5.0, 40.0, 41.0]).__next__
    stream = io.StringIO()
    hook = progress.ProgressLines(
        "GRPO",
        enabled=True,
        stream=stream,
        clock=clock,
        latest=[("rewards", "sum", "reward")],
    )

    class Logger:

      def metric_exists(self, prefix, name, mode):
        return (prefix, name, mode) == ("rewards", "sum", "train")

      def get_metric_history(self, prefix, name, mode):
        del prefix, name, mode
        return [0.25, 0.5]

    ctx = type("Ctx", (), {})()
    ctx.config = type("Config", (), {"max_steps": 10})()
    ctx.metrics_logger = Logger()
    hook.on_train_start(ctx)  # clock 0
    hook.on_train_step_end(ctx, 1, 0.1)  # clock 5: the first line.
    hook.on_train_start(ctx)  # The next global step: nothing resets.
    hook.on_train_step_end(ctx, 2, 0.1)  # clock 40: 35 s after the first.
    hook.on_train_step_end(ctx, 3, 0.1)  # clock 41: too soon, no line.
    lines = stream.getvalue().splitlines()
    self.assertLen(lines, 2)
    self.assertIn("elapsed 40s", lines[1])
    self.assertIn("reward 0.5000", lines[1])

  def test_format_duration(self):
    for seconds, text in (
        (0, "0s"),
        (59.4, "59s"),
        (95, "1m35s"),
        (3725, "1h02m05s"),
    ):
      self.assertEqual(progress.format_duration(seconds), text)


if __name__ == "__main__":
  absltest.main()
