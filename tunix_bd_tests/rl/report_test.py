# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.rl.report: metrics logged as Tunix's RL cluster does."""

import json
import os
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
from tunix_bd import config_files
from tunix_bd.generate import prompt_batches
from tunix_bd.recipes import grpo
from tunix_bd.rl import evaluation
from tunix_bd.rl import report
from tunix_bd.run import stage as stage_lib
from tunix_bd_tests.rl import rl_test_common

_NUM = 40


def _result(rng, greedy_p, sampled_p, tpf):
  greedy = {
      str(t): prompt_batches.DecodeResult(
          texts=[""] * _NUM,
          correct=rng.random(_NUM) < p,
          num_tokens=np.ones(_NUM),
          num_forwards=np.ones(_NUM),
          tokens_per_forward=tpf + 0.1 * rng.random(_NUM),
          seconds=0.0,
          max_replay_error=None,
      )
      for t, p in zip((0.5, 0.9), greedy_p)
  }
  return evaluation.HeldOutResult(
      greedy=greedy,
      sampled_correct=rng.random((_NUM, 4)) < sampled_p,
      sampled_tokens_per_forward=np.full((_NUM, 4), tpf),
  )


class ReportTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = tempfile.mkdtemp()
    rng = np.random.default_rng(0)
    self.before = _result(rng, (0.7, 0.85), 0.6, 2.0)
    self.after = _result(rng, (0.8, 0.9), 0.75, 2.3)
    self.sft = _result(rng, (0.9, 0.95), 0.8, 2.1)
    with stage_lib.values_only():
      self.run = grpo.validate(config_files.get_config("grpo", "smoke"))
    self.run = self.run.settings

  def test_writes_the_three_files_with_paired_changes(self):
    rl_test_common.log_rewards_like_tunix(self.workdir, range(1, 61))
    with mock.patch.object(
        report.plot_lib,
        "save_with_caption",
        wraps=report.plot_lib.save_with_caption,
    ) as plot:
      content = report.write_report(
          self.workdir,
          self.run,
          before=self.before,
          after=self.after,
          continued_sft=self.sft,
          steps=60,
          train_seconds=1.5,
          kl_reference="the initial policy",
      )
    for name in ("report.txt", "report.json", "report.png"):
      self.assertTrue(os.path.getsize(os.path.join(self.workdir, name)))
    with open(os.path.join(self.workdir, "report.json")) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(content)))
    self.assertEqual(
        (content["steps"], content["train_seconds"], content["kl_reference"]),
        (60, 1.5, "the initial policy"),
    )
    self.assertIn("continued_sft", content)
    title = (
        "GRPO (grpo) on block-diffusion rollouts; KL reference: the initial"
        " policy"
    )
    self.assertEqual(plot.call_args.args[0]._suptitle.get_text(), title)
    self.assertRegex(
        plot.call_args.args[2],
        r"^60 steps x \d+ prompts x G=\d+, threshold .*, 2 s on \d+ \w+"
        r" device\(s\)$",
    )
    rows = {r["metric"]: r for r in content["held_out"]}
    sampled = rows[evaluation.SAMPLED]
    expected = evaluation.paired_difference(
        self.before.sampled_correct, self.after.sampled_correct
    )
    self.assertAlmostEqual(sampled["change"], expected.delta)
    self.assertAlmostEqual(sampled["change_se"], expected.se)
    self.assertAlmostEqual(
        sampled["continued_sft"], self.sft.sampled_correct.mean()
    )
    with open(os.path.join(self.workdir, "report.txt")) as f:
      text = f.read()
    self.assertEqual(text.splitlines()[0], title)
    self.assertIn("over 60 steps", text)
    self.assertIn("cont. SFT", text)
    self.assertIn(
        f"{100 * expected.delta:+.1f} pts ± {100 * expected.se:.1f}", text
    )

  def test_final_answers_get_rows_of_their_own(self):
    rng = np.random.default_rng(1)
    before, after = self.before, self.after
    for result in (before, after):
      for decoded in result.greedy.values():
        object.__setattr__(decoded, "final_correct", rng.random(_NUM) < 0.9)
    content = report.write_report(
        self.workdir,
        self.run,
        before=before,
        after=after,
        steps=0,
        train_seconds=0.0,
        kl_reference="none (grpo.beta=0)",
    )
    rows = {r["metric"]: r for r in content["held_out"]}
    expected = evaluation.paired_difference(
        before.greedy["0.9"].final_correct, after.greedy["0.9"].final_correct
    )
    self.assertAlmostEqual(rows["final_answer@0.9"]["change"], expected.delta)
    self.assertAlmostEqual(rows["final_answer@0.9"]["change_se"], expected.se)
    # Per prompt too, to pair runs with.
    self.assertEqual(
        content["after"]["greedy_final_correct"]["0.9"],
        after.greedy["0.9"].final_correct.astype(int).tolist(),
    )
    with open(os.path.join(self.workdir, "report.txt")) as f:
      self.assertIn("greedy final answer, threshold 0.9", f.read())

  def test_without_metrics_or_sft(self):
    content = report.write_report(
        self.workdir,
        self.run,
        before=self.before,
        after=self.after,
        steps=0,
        train_seconds=0.0,
        kl_reference="none (grpo.beta=0)",
    )
    self.assertEqual(content["reward_curves"], {})
    self.assertNotIn("continued_sft", content["held_out"][0])
    with open(os.path.join(self.workdir, "report.txt")) as f:
      self.assertIn("no rewards/train/sum", f.read())


if __name__ == "__main__":
  absltest.main()
