# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of the `ar_pretrain` recipe through the real CLI."""

import collections
import contextlib
import io
import json
import os
import subprocess
import sys
from unittest import mock

from absl.testing import absltest
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.sft import checkpoint_manager

from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.cli import main
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import ar_pretrain
from tunix_bd.training import metrics
from tunix_bd.training import progress
from tunix_bd_tests import test_common


def _tunix(cwd, *args):
  """Runs `python -m tunix_bd ARGS` in `cwd`; returns the process."""
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run(
      [sys.executable, "-m", "tunix_bd", *args],
      cwd=cwd,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
  )


def _tunix_in_process(cwd, *args):
  """`tunix ARGS` in this process, as `_tunix` runs it in a fresh one.

  The CLI's own process (one line, exit status, no traceback) is held by
  cli/cli_test.py's subprocess tests and by the first run here; the others
  run without a fresh interpreter's start-up and recompiles.
  """
  stdout, stderr = io.StringIO(), io.StringIO()
  before = os.getcwd()
  os.chdir(cwd)
  try:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
      status = main.main(list(args))
  finally:
    os.chdir(before)
  return subprocess.CompletedProcess(
      args, status, stdout.getvalue(), stderr.getvalue()
  )


def _losses(workdir):
  return dict(metrics.read_metrics(workdir, "/train/loss"))


class ArPretrainTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = absltest.get_default_test_tmpdir()
    cls.cwd = os.path.join(root, "elsewhere")
    os.makedirs(cls.cwd, exist_ok=True)
    # Interrupted after 2 of 4 steps (a fresh process), then resumed; and
    # uninterrupted.
    # A relative workdir, as users write it (orbax itself needs absolute).
    cls.resumed = os.path.join(cls.cwd, "resumed")
    cls.straight = os.path.join(root, "straight")
    cls.first = _tunix(
        cls.cwd,
        "run",
        "--plugin",
        "tunix_bd",
        "ar_pretrain:tiny",
        "--config.workdir=resumed",
        "--config.train.max_steps=2",
    )
    cls.second = _tunix_in_process(
        cls.cwd,
        "run",
        "--plugin",
        "tunix_bd",
        "ar_pretrain.py:tiny",
        "--config.workdir=resumed",
    )
    # Also the train losses in its metrics.jsonl as each step starts: what
    # a kill there would leave.
    cls.logged = {}
    start = progress.ProgressLines.on_train_step_start

    def on_train_step_start(hook, train_ctx):
      cls.logged[train_ctx.train_steps] = sorted(_losses(cls.straight))
      start(hook, train_ctx)

    with mock.patch.object(
        progress.ProgressLines, "on_train_step_start", on_train_step_start
    ):
      cls.uninterrupted = _tunix_in_process(
          cls.cwd,
          "run",
          "--plugin",
          "tunix_bd",
          "ar_pretrain.py:tiny",
          f"--config.workdir={cls.straight}",
      )

  def test_runs_by_config_name_from_another_directory(self):
    for proc in (self.first, self.second, self.uninterrupted):
      self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertIn("greedy exact match", self.second.stdout)
    with open(os.path.join(self.straight, "eval.json")) as f:
      report = json.load(f)
    self.assertEqual(
        set(report["exact_match"]), {"double", "reverse", "sort", "all"}
    )
    self.assertLen(report["predictions"], 32)

  def test_resume_continues_with_the_same_losses(self):
    resumed, straight = _losses(self.resumed), _losses(self.straight)
    self.assertEqual(sorted(straight), [1, 2, 3, 4])
    self.assertEqual(sorted(resumed), [1, 2, 3, 4])
    for step in (1, 2, 3, 4):
      self.assertAlmostEqual(resumed[step], straight[step], places=5)

  def test_a_kill_after_a_checkpoint_loses_no_metrics_row(self):
    # Step 3 starts after step 2's checkpoint (every 2 steps).
    self.assertEqual(self.logged[2], [1, 2])

  def test_resume_says_so_and_keeps_one_metrics_row_per_step(self):
    self.assertIn(
        "ar_pretrain: resumed from step 2 (workdir resumed)", self.second.stdout
    )
    rows = collections.Counter(
        (r["name"], r["step"]) for r in metrics.read_records(self.resumed)
    )
    self.assertEqual({k: n for k, n in rows.items() if n > 1}, {})
    self.assertIn(("/eval/loss", 2), rows)

  def test_export_reloads_with_identical_logits(self):
    export_dir = os.path.join(self.straight, "export")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
      self.assertTrue(os.path.exists(os.path.join(export_dir, name)), name)
    exported, _ = hf_checkpoint.load(export_dir)
    # Zeroed, then restored from the last orbax checkpoint: the trained
    # parameters, independently of the export.
    trained, _ = hf_checkpoint.load(export_dir)
    nnx.update(trained, jax.tree.map(jnp.zeros_like, nnx.state(trained)))
    manager = checkpoint_manager.CheckpointManager(
        os.path.join(self.straight, "checkpoints")
    )
    step, _ = manager.maybe_restore(trained)
    self.assertEqual(step, 4)
    tokens = jnp.asarray(np.random.default_rng(0).integers(5, 100, (2, 12)))
    positions = jnp.broadcast_to(jnp.arange(12), tokens.shape)
    mask = jnp.tril(jnp.ones((1, 12, 12), bool))
    forward = lambda m: test_common.JittedModel(m)(
        tokens, positions, None, mask
    )
    got, _ = forward(exported)
    want, _ = forward(trained)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

  def test_changed_settings_on_resume_fail_naming_the_field(self):
    proc = _tunix_in_process(
        self.cwd,
        "run",
        "--plugin",
        "tunix_bd",
        "ar_pretrain.py:tiny",
        f"--config.workdir={self.straight}",
        "--config.model.embed_dim=48",
    )
    self.assertEqual(proc.returncode, 1)
    self.assertIn("model.embed_dim", proc.stderr)
    self.assertNotIn("Traceback", proc.stderr)


class ValidateTest(absltest.TestCase):

  def test_rejects_bad_settings_naming_them(self):
    path = plugin.PLUGIN.config_dir / "ar_pretrain.py"
    for key, value in (
        ("train.batch_size", 0),
        ("model.num_kv_heads", 3),
        ("train.learning_rate", 0.0),
    ):
      config = config_loading.load_config(path, "tiny")
      section, name = key.split(".")
      config[section][name] = value
      with self.assertRaisesRegex(ValueError, key.replace(".", r"\.")):
        ar_pretrain.validate(config)


if __name__ == "__main__":
  absltest.main()
