# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.results: training timed, evaluated, reported."""

import json
import os
import types
from unittest import mock

from absl.testing import absltest
import numpy as np
from tunix_bd import config_files
from tunix_bd.generate import prompt_batches
from tunix_bd.recipes import grpo
from tunix_bd.rl import evaluation
from tunix_bd.rl import report
from tunix_bd.rl import results
from tunix_bd.run import stage as stage_lib
from tunix_bd.training import options

_NUM = 4


def _result(correct: bool) -> evaluation.HeldOutResult:
  greedy = {
      0.5: prompt_batches.DecodeResult(
          texts=[""] * _NUM,
          num_tokens=np.ones(_NUM),
          num_forwards=np.ones(_NUM),
          tokens_per_forward=np.ones(_NUM),
          seconds=0.0,
          max_replay_error=None,
          correct=np.full(_NUM, correct),
      )
  }
  return evaluation.HeldOutResult(
      greedy=greedy,
      sampled_correct=np.full((_NUM, 2), correct),
      sampled_tokens_per_forward=np.ones((_NUM, 2)),
  )


class _Learner:
  """Trains by advancing the actor trainer's steps and swapping its model."""

  def __init__(self, trainer, steps):
    self.trainer, self.steps, self.batches = trainer, steps, None

  def train(self, batches):
    self.batches = list(batches)
    self.trainer.train_steps += self.steps
    self.trainer.model = "trained"


def _cluster(max_steps=10):
  training = types.SimpleNamespace(max_steps=max_steps)
  return types.SimpleNamespace(
      actor_trainer=types.SimpleNamespace(model="start", train_steps=1),
      cluster_config=types.SimpleNamespace(training_config=training),
  )


_ITEM = {"prompts": np.asarray(["1+1="]), "answer": np.asarray(["2"])}


class TrainAndEvaluateTest(absltest.TestCase):

  def test_times_training_alone_then_evaluates_the_trained_policy(self):
    cluster = _cluster()
    learner = _Learner(cluster.actor_trainer, steps=3)
    evaluated = []
    evaluate = lambda model: evaluated.append(model) or _result(True)
    before = _result(False)
    clock = iter([10.0, 12.5])
    with mock.patch.object(results.time, "perf_counter", lambda: next(clock)):
      got = results.train_and_evaluate(
          cluster, learner, [_ITEM], evaluate, before=before
      )
    self.assertEqual(learner.batches, [_ITEM])
    self.assertEqual(evaluated, ["trained"])
    self.assertIs(got.before, before)
    self.assertTrue(got.after.greedy[0.5].correct.all())
    self.assertIsNone(got.continued_sft)
    self.assertEqual((got.steps, got.train_seconds), (4, 2.5))

  def test_the_continued_sft_model_is_loaded_after_training(self):
    cluster = _cluster()
    learner = _Learner(cluster.actor_trainer, steps=1)
    evaluated = []
    evaluate = lambda model: evaluated.append(model) or _result(True)
    load = lambda: f"sft after {cluster.actor_trainer.train_steps} steps"
    got = results.train_and_evaluate(
        cluster,
        learner,
        [],
        evaluate,
        before=_result(False),
        continued_sft=load,
    )
    self.assertEqual(evaluated, ["trained", "sft after 2 steps"])
    self.assertIsNotNone(got.continued_sft)

  def test_items_are_checked_whichever_the_learner(self):
    cluster = _cluster()
    learner = _Learner(cluster.actor_trainer, steps=1)
    bad = {"prompts": ["1+1="]}  # Tunix would repeat a list element-wise.
    with self.assertRaisesRegex(
        ValueError, r"^train dataset item 0: 'prompts'"
    ):
      results.train_and_evaluate(
          cluster, learner, [bad], lambda m: _result(True), before=None
      )

  def test_a_finished_run_trains_no_further_whichever_the_learner(self):
    cluster = _cluster(max_steps=1)
    learner = _Learner(cluster.actor_trainer, steps=1)
    got = results.train_and_evaluate(
        cluster, learner, [_ITEM], lambda m: _result(True), before=None
    )
    self.assertIsNone(learner.batches)
    self.assertEqual(got.steps, 1)


class HeldOutEvaluationTest(absltest.TestCase):

  def test_binds_the_sources_and_settings_to_evaluate(self):
    sources = types.SimpleNamespace(bd="bd", decode="decode", tokenizer="tok")
    settings = options.EvalSettings()
    evaluate = results.held_out_evaluation("prompts", sources, settings)
    self.assertIs(evaluate.func, evaluation.evaluate)
    self.assertEqual(
        evaluate.keywords,
        dict(
            prompts="prompts",
            bd="bd",
            decode="decode",
            settings=settings,
            tokenizer="tok",
        ),
    )


class GrpoResultsTest(absltest.TestCase):

  def test_the_report_has_the_steps_wall_time_and_every_evaluation(self):
    workdir = self.create_tempdir().full_path
    with stage_lib.values_only():
      run = grpo.validate(config_files.get_config("grpo", "smoke")).settings
    got = results.GrpoResults(
        before=_result(False),
        after=_result(True),
        continued_sft=_result(False),
        steps=3,
        train_seconds=1.5,
    )
    with mock.patch.object(
        report, "plot_report", wraps=report.plot_report
    ) as plot:
      content = got.write_report(workdir, run, "the initial policy")
    with open(os.path.join(workdir, "report.json")) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(content)))
    self.assertEqual((content["steps"], content["train_seconds"]), (3, 1.5))
    self.assertIn("continued_sft", content)
    self.assertEqual(content["kl_reference"], "the initial policy")
    self.assertEqual(
        plot.call_args.kwargs["title"],
        "GRPO (grpo) on block-diffusion rollouts; KL reference: the initial"
        " policy",
    )
    with open(os.path.join(workdir, "report.txt")) as f:
      self.assertIn("KL reference: the initial policy", f.readline())
    self.assertEqual(
        plot.call_args.kwargs["caption"], report.caption(run, 3, 1.5)
    )


if __name__ == "__main__":
  absltest.main()
