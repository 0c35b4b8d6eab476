# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The workdir rule (`tunix_bd.run.workdir`), in every recipe.

A workdir a run cannot write fails in one line naming `workdir` before any
compute and writes nothing; a resume prints what it resumed and keeps one
metrics row per step. URL workdirs are tested in `files_test.py`, beside
its offline bucket.
"""

import contextlib
import fcntl
import gc
import glob
import importlib
import io
import json
import os
import signal
import socket
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import plugin as benchmarks_plugin
from tunix_bd import config_files
from tunix_bd.cli import main
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.sft import trainer as sft_trainer
from tunix_bd.training import metrics
from tunix_bd.training import options
from tunix_bd_tests import test_common
from tunix_bd_tests.run import run_test_common

# Every recipe, and the key that names where it writes; the benchmarks'
# are the clone's `benchmarks` package's.
_RECIPES = (
    ("ar_pretrain", "workdir"),
    ("sft", "workdir"),
    ("opd", "workdir"),
    ("grpo", "workdir"),
    ("generate", "workdir"),
    ("compare", "workdir"),
    ("quickstart", "workdir"),
    ("bench_rl", "workdir"),
    ("bench_opd", "workdir"),
    ("bench_sft", "output"),
    ("bench_decode", "output"),
)
_BENCHMARKS = ("bench_rl", "bench_opd", "bench_sft", "bench_decode")
_BAD = ("existing_file", "under_a_file", "read_only")


def _tree(root: str) -> list[str]:
  return sorted(
      os.path.join(d, n)
      for d, dirs, names in os.walk(root)
      for n in dirs + names
  )


class CheckTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.file = self.create_tempfile("taken").full_path

  def test_a_new_or_existing_directory_passes_and_is_made_absolute(self):
    self.assertEqual(
        workdir_lib.check(os.path.join(self.root, "a", "b")),
        os.path.join(self.root, "a", "b"),
    )
    self.assertEqual(workdir_lib.check(self.root), self.root)
    with mock.patch.object(os, "getcwd", return_value=self.root):
      self.assertEqual(
          workdir_lib.check("runs/x"), os.path.join(self.root, "runs", "x")
      )
    self.assertEqual(_tree(self.root), [])

  def test_bad_workdirs_name_the_key(self):
    for workdir, message in (
        ("", " must be set"),
        (self.file, "names an existing file"),
        (os.path.join(self.file, "run"), "cannot be written: .* is a file"),
    ):
      with self.assertRaisesRegex(ValueError, f"^workdir.*{message}"):
        workdir_lib.check(workdir)
    os.symlink(os.path.join(self.root, "gone"), os.path.join(self.root, "l"))
    with self.assertRaisesRegex(ValueError, "names an existing file"):
      workdir_lib.check(os.path.join(self.root, "l"))

  def test_a_read_only_file_system_is_refused(self):
    # As if `root` were mounted read-only: access() answers EROFS (root
    # included), which a chmod cannot show to a test running as root.
    real = os.access
    read_only = lambda path, mode: path != self.root and real(path, mode)
    with mock.patch.object(os, "access", side_effect=read_only):
      with self.assertRaisesRegex(ValueError, "^workdir=.*read-only"):
        workdir_lib.check(os.path.join(self.root, "run"))

  def test_an_output_file_is_checked_like_a_workdir(self):
    workdir_lib.check_file(os.path.join(self.root, "new", "out.json"), "output")
    with self.assertRaisesRegex(ValueError, "^output=.*is a directory"):
      workdir_lib.check_file(self.root, "output")
    with self.assertRaisesRegex(ValueError, "^output=.*is a file"):
      workdir_lib.check_file(os.path.join(self.file, "out.json"), "output")


class EveryRecipeTest(parameterized.TestCase):
  """Each recipe refuses an unwritable workdir first, writing nothing.

  Each recipe meets one kind of bad workdir, the kinds taken in turn: every
  kind is one rule, `workdir.check`, which `CheckTest` holds for each kind;
  here each recipe shows that it calls that rule before anything else.
  """

  @parameterized.named_parameters(
      dict(testcase_name=f"{name}_{bad}", name=name, key=key, bad=bad)
      for (name, key), bad in zip(_RECIPES, _BAD * len(_RECIPES))
  )
  def test_refused_before_any_compute(self, name, key, bad):
    root = self.create_tempdir().full_path
    taken = os.path.join(root, "taken")
    with open(taken, "w") as f:
      f.write("x")
    path = {
        # Overwriting an output file is fine; a directory in its place not.
        "existing_file": root if key == "output" else taken,
        "under_a_file": os.path.join(taken, "run"),
        "read_only": os.path.join(root, "run"),
    }[bad]
    if name in _BENCHMARKS:
      config = benchmarks_plugin.get_config(name)
      module = importlib.import_module(f"benchmarks.recipes.{name}")
    else:
      config = config_files.get_config(name)
      module = importlib.import_module(f"tunix_bd.recipes.{name}")
    config[key] = path
    before = _tree(root)
    real = os.access
    read_only = lambda p, mode: p != root and real(p, mode)
    with mock.patch.object(os, "access", side_effect=read_only):
      with self.assertRaisesRegex(ValueError, f"^{key}="):
        module.run(config)
    self.assertEqual(_tree(root), before)

  def test_the_cli_prints_one_line_and_exits_1(self):
    taken = self.create_tempfile("taken").full_path
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      status = main.main(
          ["run", "--plugin", "tunix_bd", "sft.py", f"--config.workdir={taken}"]
      )
    self.assertEqual(status, 1)
    self.assertIn(f"tunix: error: workdir='{taken}' names", stderr.getvalue())
    self.assertNotIn("Traceback", stderr.getvalue())


class LockTest(absltest.TestCase):
  """One run at a time: a live holder is named, a killed one blocks nothing."""

  def setUp(self):
    super().setUp()
    self.workdir = os.path.join(self.create_tempdir().full_path, "run")

  def _hold(self):
    holder = run_test_common.hold_workdir(self.workdir)
    self.addCleanup(holder.wait)
    self.addCleanup(holder.kill)
    return holder

  def test_a_live_holder_is_named_and_a_killed_one_does_not_block(self):
    holder = self._hold()
    with self.assertRaisesRegex(
        ValueError,
        rf"^workdir='{self.workdir}' is in use by a live run \(pid"
        rf" {holder.pid} on {socket.gethostname()}, started 20\d\d-",
    ):
      workdir_lib.lock(self.workdir)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    self.assertIsNotNone(workdir_lib.lock(self.workdir))
    with open(os.path.join(self.workdir, workdir_lib.LOCK_FILE)) as f:
      self.assertEqual(json.load(f)["pid"], os.getpid())

  def test_its_own_process_takes_it_again_until_the_handle_is_dropped(self):
    held = workdir_lib.lock(self.workdir)
    self.assertIs(workdir_lib.lock(self.workdir, create=False), held)
    path = os.path.join(self.workdir, workdir_lib.LOCK_FILE)
    with open(path) as other:  # Another open file: flock conflicts.
      with self.assertRaises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
      del held
      gc.collect()
      fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)

  def test_a_missing_workdir_is_made_only_when_asked_and_a_url_is_left(self):
    self.assertIsNone(workdir_lib.lock(self.workdir, create=False))
    self.assertFalse(os.path.exists(self.workdir))
    with mock.patch.object(os, "makedirs") as makedirs:
      self.assertIsNone(workdir_lib.lock("gs://bucket/run"))
    makedirs.assert_not_called()


class LaunchingTest(absltest.TestCase):
  """A launch that fails before its run started leaves the workdir as it was."""

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path

  def _fail(self, *workdirs, start=()):
    with self.assertRaisesRegex(ValueError, "^bad mesh$"):
      with workdir_lib.launching():
        held = [workdir_lib.lock(w) for w in workdirs]
        os.makedirs(os.path.join(workdirs[-1], "tensorboard"))
        for w in start:
          workdir_lib.started(w)
        raise ValueError("bad mesh")
    return held

  def test_what_the_lock_made_is_removed_and_the_lock_released(self):
    existing = os.path.join(self.root, "existing")
    os.makedirs(existing)
    self._fail(os.path.join(self.root, "new", "run"))
    self._fail(existing)
    # Only the lock is told apart from an existing workdir's files.
    self.assertEqual(_tree(self.root), [existing, f"{existing}/tensorboard"])
    holder = run_test_common.hold_workdir(existing)  # Released.
    holder.kill()
    holder.wait()

  def test_a_started_run_keeps_its_workdir_and_the_chain_around_it(self):
    chain = os.path.join(self.root, "chain")
    stage = os.path.join(chain, "stage")
    self._fail(chain, stage, start=[stage])
    self.assertTrue(os.path.isfile(os.path.join(stage, workdir_lib.LOCK_FILE)))
    with workdir_lib.launching():  # Success: everything is kept.
      workdir_lib.lock(os.path.join(self.root, "ok"))
    self.assertTrue(os.path.isdir(os.path.join(self.root, "ok")))


def _sft_trainer(workdir):
  """A tiny SFT trainer as the recipe builds it, keeping two checkpoints."""
  tokenizer = tokenizer_lib.build_char_tokenizer()
  settings = options.Train(max_steps=4, warmup_steps=0, checkpoints_to_keep=2)
  bd = bd_config.BlockDiffusionConfig(
      block_size=8,
      mask_token_id=tokenizer.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN),
  )
  return sft_trainer.DiffusionSftTrainer(
      test_common.init_qwen3(
          test_common.tiny_qwen3_config(len(tokenizer)), seed=0, scale=0.05
      ),
      options.optimizer(settings),
      options.training_config(settings, workdir, "SFT"),
      config=bd,
  )


class RestoringTest(absltest.TestCase):

  def test_a_checkpoint_orbax_cannot_read_is_named_in_one_line(self):
    workdir = self.create_tempdir().full_path
    trainer = _sft_trainer(workdir)
    for step in (1, 2):
      trainer.checkpoint_manager.save(
          step, trainer.model, trainer.optimizer, force=True
      )
    trainer.close()
    newest = os.path.join(workdir_lib.checkpoints(workdir), "2")
    for name in glob.glob(f"{newest}/model_params/ocdbt.process_0/d/*"):
      os.truncate(name, 10)
    with self.assertRaisesRegex(
        ValueError,
        rf"^checkpoint '{newest}' cannot be restored \(Encountered error"
        r" while reading .*\); move that directory away to resume from"
        r" step 1\.$",
    ):
      with workdir_lib.restoring(workdir):
        _sft_trainer(workdir)
    os.rename(newest, f"{workdir}/step_2_corrupt")  # As the line says.
    with workdir_lib.restoring(workdir):
      self.assertEqual(_sft_trainer(workdir).train_steps, 1)
    with self.assertRaises(KeyError):  # Errors not from Orbax pass.
      with workdir_lib.restoring(workdir):
        raise KeyError("x")


class ResumedTest(absltest.TestCase):

  def _write(self, workdir, rows):
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, metrics.METRICS_FILE), "w") as f:
      for name, step in rows:
        f.write(json.dumps({"name": name, "step": step, "value": 1.0}) + "\n")

  def _read(self, workdir):
    return [(r["name"], r["step"]) for r in metrics.read_records(workdir)]

  def test_drops_the_rows_the_resumed_run_logs_again(self):
    workdir = self.create_tempdir().full_path
    # Killed after step 3, resumed from the checkpoint of step 2; Tunix
    # evaluates again at step 2 before training on.
    rows = [("/eval/loss", 0)]
    rows += [("/train/loss", s) for s in (1, 2, 3)]
    rows += [("/eval/loss", 2), ("/train/loss", None)]
    self._write(workdir, rows)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      workdir_lib.resumed(workdir, 2, recipe="sft")
    self.assertEqual(
        stdout.getvalue(),
        f"sft: resumed from step 2 (workdir {workdir}); 2 metrics rows to"
        " be logged again dropped.\n",
    )
    self.assertEqual(
        self._read(workdir),
        [
            ("/eval/loss", 0),
            ("/train/loss", 1),
            ("/train/loss", 2),
            ("/train/loss", None),
        ],
    )
    self.assertEqual(os.listdir(workdir), [metrics.METRICS_FILE])

  def test_a_fresh_run_says_nothing_and_keeps_the_file(self):
    workdir = self.create_tempdir().full_path
    self._write(workdir, [("/train/loss", 1)])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      workdir_lib.resumed(workdir, 0, recipe="sft")
    self.assertEqual(stdout.getvalue(), "")
    self.assertEqual(self._read(workdir), [("/train/loss", 1)])

  def test_each_metric_may_restart_at_its_own_step(self):
    workdir = self.create_tempdir().full_path
    self._write(workdir, [("actor/train/loss", 2), ("rewards/sum", 1)])
    with contextlib.redirect_stdout(io.StringIO()):
      workdir_lib.resumed(
          workdir,
          2,
          recipe="grpo",
          relogged_from=lambda name: 3 if name.startswith("actor/") else 1,
      )
    self.assertEqual(self._read(workdir), [("actor/train/loss", 2)])


if __name__ == "__main__":
  absltest.main()
