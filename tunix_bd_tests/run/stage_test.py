# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.run.stage: the run skeleton every training recipe uses."""

import contextlib
import errno
import io
import os
import resource
import signal
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import plugin as benchmarks_plugin
from flax import nnx
import ml_collections
import orbax.checkpoint as ocp
from tunix.sft import checkpoint_manager
from tunix_bd import config_files
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.models import sections
from tunix_bd.run import provenance
from tunix_bd.run import stage as stage_lib
from tunix_bd.training import options
from tunix_bd_tests import test_common
from tunix_bd_tests.run import run_test_common

_spec = run_test_common.spec
_SFT_TRAIN = options.TimedTrain
_SFT_MODEL = sections.SftModel


def _sft_stage(config):
  return stage_lib.Stage(
      config,
      _spec(
          model=_SFT_MODEL,
          bd=sections.Bd,
          train=_SFT_TRAIN,
      ),
  )


class StageTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.config = config_files.get_config("sft", "tiny")
    self.config.workdir = os.path.join(self.root, "run")
    self.config.model.checkpoint = self.root  # Any existing directory.

  @parameterized.parameters(
      ("bd", "block_size", 0, r"^bd\.block_size must be >= 1"),
      ("train", "time_budget_s", -1.0, r"^train\.time_budget_s must be"),
      ("train", "learning_rate", 0.0, r"^train\.learning_rate must be"),
      ("model", "dtype", "float64", r"^model\.dtype must be one of"),
  )
  def test_a_bad_section_fails_naming_the_key_before_anything_is_written(
      self, section, key, value, regex
  ):
    self.config[section][key] = value
    with self.assertRaisesRegex(ValueError, regex):
      _sft_stage(self.config)
    self.assertFalse(os.path.exists(self.config.workdir))

  def test_a_missing_checkpoint_names_the_key_and_what_to_run(self):
    self.config.model.checkpoint = os.path.join(self.root, "missing")
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.checkpoint='.*missing' is not a directory.*"
        r"ar_pretrain\.py",
    ):
      _sft_stage(self.config)

  def test_a_truncated_weight_file_names_the_key_and_file_before_writing(
      self,
  ):
    header = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    path = os.path.join(self.root, "model.safetensors")
    with open(path, "wb") as f:  # 4 of the tensor's 8 bytes.
      f.write(len(header).to_bytes(8, "little") + header + b"1234")
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.checkpoint='.*': .*model\.safetensors is truncated",
    ):
      _sft_stage(self.config)
    self.assertFalse(os.path.exists(self.config.workdir))

  @parameterized.parameters(
      ("sft", "long", "ar_pretrain.py:long`"),
      ("sft", "long8", "quickstart.py:long`"),
      ("sft", "long16", "sft.py:long8`"),
      ("grpo", "weak", "--config.workdir=runs/sft_weak`"),
  )
  def test_a_variants_missing_input_names_the_command_that_makes_it(
      self, name, variant, command
  ):
    self.enter_context(contextlib.chdir(self.root))  # No runs/ here.
    config = config_files.get_config(name, variant)
    model = dict(sft=_SFT_MODEL, grpo=sections.GrpoModel)
    with self.assertRaisesRegex(
        ValueError, f"is not a directory; make it with `tunix run .*{command}"
    ):
      stage_lib.Stage(config, _spec(model=model[name]))

  def test_a_runs_workdir_or_checkpoint_given_as_a_model_names_its_export(
      self,
  ):
    step = os.path.join(self.root, "checkpoints", "400")
    os.makedirs(step)
    self.config.model.checkpoint = step
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint=.* is an Orbax training checkpoint"
    ):
      _sft_stage(self.config)
    os.makedirs(os.path.join(self.root, "export"))
    with open(os.path.join(self.root, "export", "config.json"), "w") as f:
      f.write("{}")
    export = os.path.join(self.root, "export")
    for path, what in ((self.root, "a run's workdir"), (step, "in a run's")):
      self.config.model.checkpoint = path
      with self.assertRaisesRegex(
          ValueError, f"is {what}.*; its model is '{export}': pass that"
      ):
        _sft_stage(self.config)

  def test_an_unset_checkpoint_says_to_set_one(self):
    config = config_files.get_config("sft", "qwen3")
    config.workdir = self.config.workdir
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.checkpoint='' is not a directory: set"
        r" --config\.model\.checkpoint=DIR to a Hugging Face Qwen3",
    ):
      _sft_stage(config)

  def test_a_random_model_needs_no_checkpoint_but_an_optional_one_is_checked(
      self,
  ):
    config = config_files.get_config("grpo", "smoke")
    config.workdir = os.path.join(self.root, "grpo")
    config.model.checkpoint = os.path.join(self.root, "missing")
    grpo_model = _spec(model=sections.GrpoModel)
    stage_lib.Stage(config, grpo_model)
    config.model.reference = os.path.join(self.root, "missing")
    with self.assertRaisesRegex(ValueError, r"^model\.reference="):
      stage_lib.Stage(config, grpo_model)

  def test_a_run_writing_one_output_file_checks_that_file_instead(self):
    config = benchmarks_plugin.get_config("bench_sft", "tiny")
    self.assertNotIn("workdir", config)
    stage = stage_lib.Stage(config, _spec(), writes="output")  # Empty: no file.
    self.assertIsNone(stage.workdir)
    config.output = os.path.join(self.root, "out", "report.json")
    stage_lib.Stage(config, _spec(), writes="output")
    config.output = self.root
    with self.assertRaisesRegex(ValueError, r"^output=.*is a directory"):
      stage_lib.Stage(config, _spec(), writes="output")
    self.assertEqual(os.listdir(self.root), [])

  def test_the_fingerprint_is_recorded_at_start_only(self):
    stage = stage_lib.Stage(self.config, _spec(train=_SFT_TRAIN))
    fingerprint = stage.check_fingerprint(tokenizer="t")
    record = os.path.join(
        self.config.workdir, "checkpoints", fingerprint_lib.FILE_NAME
    )
    self.assertFalse(os.path.exists(record))
    self.assertEqual(fingerprint["fields"]["recipe"], "sft")
    # Resumable keys are not in it; the others are.
    self.assertNotIn("max_steps", fingerprint["fields"]["train"])
    self.assertIn("learning_rate", fingerprint["fields"]["train"])
    stage.start(0)
    self.assertTrue(os.path.exists(record))

  def test_a_held_workdir_is_refused_at_launch_or_before_its_first_write(self):
    launch = lambda: stage_lib.Stage(self.config, _spec(train=_SFT_TRAIN))
    stage = launch()  # A new workdir: nothing written yet.
    self.assertFalse(os.path.exists(self.config.workdir))
    holder = run_test_common.hold_workdir(self.config.workdir)
    self.addCleanup(holder.wait)
    self.addCleanup(holder.kill)
    in_use = rf"^workdir=.* is in use by a live run \(pid {holder.pid} "
    with self.assertRaisesRegex(ValueError, in_use):
      stage.check_fingerprint(tokenizer="t")
    with self.assertRaisesRegex(ValueError, in_use):
      launch()  # An existing one: refused first.

  def test_a_stop_short_of_max_steps_or_a_resume_past_it_is_said(self):
    self.config.train.update(max_steps=20, time_budget_s=1.5)
    stage = stage_lib.Stage(self.config, _spec(train=_SFT_TRAIN))
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      stage.resumed(0)
      stage.stopped(20)  # Reached max_steps: nothing to say.
      stage.stopped(7)
      stage.resumed(30)
    self.assertEqual(
        [l for l in stdout.getvalue().splitlines() if "resumed" not in l],
        [
            (
                "sft: train.time_budget_s=1.5 spent: stopped at step 7 of"
                " train.max_steps=20."
            ),
            (
                "sft: train.max_steps=20 is not above the restored step 30: no"
                " step to train."
            ),
        ],
    )


class ConvertedModelTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.config = run_test_common.smoke_grpo_config(self.root)

  def test_provenances_of_a_random_model_are_its_mark(self):
    stage = run_test_common.converted_stage(self.config)
    self.assertEqual(
        stage.provenances("checkpoint", "reference"), {"random_init": True}
    )

  def test_provenances_record_each_checkpoint(self):
    checkpoint = os.path.join(self.root, "ar")
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=64, num_layers=1),
        checkpoint,
        tokenizer=tokenizer_lib.build_char_tokenizer(),
    )
    self.config.model.update(
        random_init=False, checkpoint=checkpoint, reference=checkpoint
    )
    stage = stage_lib.Stage(self.config, _spec(model=sections.GrpoModel))
    record = provenance.identify(checkpoint).provenance()
    self.assertEqual(
        stage.provenances("checkpoint", "reference"),
        {"checkpoint": record, "reference": record},
    )


@contextlib.contextmanager
def _file_size_limit(size: int):
  """Writes past `size` bytes fail with EFBIG (`ulimit -f`), as a full disk
  fails with ENOSPC, in this process's threads (TensorStore's too)."""
  handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # Else it kills.
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, handler)


class LaunchTest(absltest.TestCase):

  def test_a_checkpoint_save_out_of_space_is_one_line_naming_its_directory(
      self,
  ):
    config = ml_collections.ConfigDict(
        {"workdir": self.create_tempdir().full_path}
    )
    directory = os.path.join(config.workdir, "checkpoints")
    # As a trainer on CPU saves: Tunix's manager, in the foreground.
    manager = checkpoint_manager.CheckpointManager(
        directory,
        ocp.CheckpointManagerOptions(enable_async_checkpointing=False),
    )
    model = nnx.Linear(256, 256, rngs=nnx.Rngs(0))  # 256 KiB of weights.

    @stage_lib.launch
    def run(unused_config):
      with _file_size_limit(64 * 1024):
        manager.save(1, model)

    with self.assertRaisesRegex(
        ValueError,
        rf"^saving a checkpoint in '{directory}' failed: File too large; free"
        " space there, then a relaunch with the same workdir resumes from"
        r" the last complete checkpoint\.$",
    ) as caught:
      run(config)
    # Orbax's own error, TensorStore's.
    self.assertIn("os_error_code", str(caught.exception.__cause__))

    @stage_lib.launch
    def write_metrics(unused_config):
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "metrics.jsonl")

    with self.assertRaises(OSError):  # Not a checkpoint: as it is.
      write_metrics(config)


class TimeBudgetTest(absltest.TestCase):

  def test_no_budget_passes_the_batches_through(self):
    batches = [1, 2, 3]
    self.assertIs(options.TimedTrain().bounded(batches), batches)

  def test_a_budget_ends_the_batches_once_spent(self):
    clock = iter([0.0, 0.0, 1.0, 1.9, 2.5])
    with mock.patch.object(options.time, "perf_counter", lambda: next(clock)):
      timed = options.TimedTrain(time_budget_s=2.0)
      bounded = list(timed.bounded("abcdef"))
    # The clock starts at the first batch; the fourth comes after 2 s.
    self.assertEqual(bounded, ["a", "b", "c"])


if __name__ == "__main__":
  absltest.main()
