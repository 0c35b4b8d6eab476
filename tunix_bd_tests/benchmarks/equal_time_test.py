# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`equal_time`: its sections, every arm's config, the table.

The arms run through the `opd` and `sft` recipes, tested in their own
tests; here, that each arm gets the benchmark's settings.
"""

import os

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import config_files
from tunix_bd import mesh as mesh_lib
from benchmarks import equal_time
from tunix_bd.distillation import sources

# A converted (SDAR-format) student: its own block size, alignment, mask.
_STUDENT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)),
    "testdata",
    "bd_formats",
    "sdar_tiny",
)


class SettingsTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("budget", dict(time_budget_s=0.0), r"bench\.time_budget_s.* > 0"),
      ("steps", dict(max_steps=0), r"bench\.max_steps"),
      ("warmup", dict(warmup_steps=-1), r"bench\.warmup_steps"),
      ("rate", dict(learning_rate=-1.0), r"bench\.learning_rate"),
      ("threshold", dict(rollout_threshold=-1.0), r"bench\.rollout_thresh"),
      ("thresholds", dict(thresholds=(0.5, "x")), r"bench\.thresholds"),
      ("eval", dict(num_eval=0), r"bench\.num_eval"),
  )
  def test_bad_bench_keys_are_named(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      equal_time.EqualTimeSettings(**overrides)


class ArmConfigTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.bench = equal_time.EqualTimeSettings(
        time_budget_s=7.0,
        max_steps=50,
        learning_rate=1e-3,
        batch_size=4,
        rollout_threshold=0.5,
        hard_loss_weight=0.25,
        num_eval=8,
        thresholds=(0.7,),
    )
    self.model = equal_time.EqualTimeModelSettings(
        student=_STUDENT, teacher="teacher"
    )

  def _check_train(self, config, workdir):
    self.assertEqual((config.seed, config.workdir), (3, workdir))
    train = config.train
    self.assertEqual(train.time_budget_s, 7.0)
    self.assertEqual(train.max_steps, 50)
    self.assertEqual(train.learning_rate, 1e-3)
    self.assertEqual(train.warmup_steps, 10)
    self.assertEqual(train.batch_size, 4)
    # One evaluation and checkpoint, at the end (the budget stops first).
    self.assertEqual(train.eval_every_n_steps, 50)
    self.assertEqual(train.checkpoint_every_n_steps, 50)

  def test_the_opd_arms_distill_the_student_on_their_canvases(self):
    config = equal_time.opd_arm_config(
        config_files.get_config("opd"),
        self.model,
        self.bench,
        sources.TRACE,
        seed=3,
        workdir="w/opd_trace",
    )
    self._check_train(config, "w/opd_trace")
    self.assertEqual(config.model.student, _STUDENT)
    self.assertEqual(config.model.teacher, "teacher")
    self.assertEqual(config.opd.canvas, sources.TRACE)
    self.assertEqual(config.opd.hard_loss_weight, 0.25)
    self.assertEqual(config.rollout.threshold, 0.5)
    self.assertEqual(config.data.num_eval, 8)
    self.assertEqual(tuple(config.eval.thresholds), (0.7,))

  def test_continued_sft_keeps_the_students_block_diffusion_settings(self):
    config = equal_time.sft_arm_config(
        config_files.get_config("sft"),
        self.model,
        self.bench,
        mesh_lib.MeshSettings(fsdp=1),
        seed=3,
        workdir="w/sft",
    )
    self._check_train(config, "w/sft")
    self.assertEqual(config.model.checkpoint, _STUDENT)
    self.assertEqual(config.mesh.fsdp, 1)
    # sdar_tiny: 4-token blocks, same-position alignment, `<|MASK|>`.
    self.assertEqual(config.bd.block_size, 4)
    self.assertEqual(config.bd.alignment, "same_position")
    self.assertEqual(config.bd.mask_token, "<|MASK|>")


class TableTest(absltest.TestCase):

  def test_one_row_per_arm_and_two_metrics_per_threshold(self):
    bench = equal_time.EqualTimeSettings(thresholds=(0.5, 0.9))
    names = equal_time.metric_names(bench.thresholds)
    self.assertEqual(
        names,
        [
            "exact_match@0.5",
            "tokens_per_forward@0.5",
            "exact_match@0.9",
            "tokens_per_forward@0.9",
        ],
    )
    rows = [
        dict(arm="start (SFT student)", steps=0, **dict.fromkeys(names, 0.5)),
        dict(arm="OPD trace", steps=12, **dict.fromkeys(names, 1.25)),
    ]
    lines = equal_time.format_table(rows, bench).splitlines()
    self.assertIn("180 s per arm", lines[0])
    self.assertEqual(lines[1].split(), ["arm", "steps", *names])
    self.assertEqual(lines[3].split(), ["OPD", "trace", "12", *["1.250"] * 4])


if __name__ == "__main__":
  absltest.main()
