# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `grpo` recipe end to end: smoke, resume, fingerprint, bad inputs."""

import collections
import contextlib
import io
import json
import os
import shutil
import types
from unittest import mock
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import jax
import ml_collections
import numpy as np
from tunix_bd import compat
from tunix_bd import config_files
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.recipes import grpo
from tunix_bd.rl import cluster as cluster_lib
from tunix_bd.rl import learner as learner_lib
from tunix_bd.rl import wiring
from tunix_bd.training import metrics
from tunix_bd.training import progress

_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(grpo.__file__)))


def _in_project(filename: str) -> bool:
  return os.path.abspath(filename).startswith(_PROJECT + os.sep)


class _Killed(Exception):
  """The kill `_killed_after` delivers."""


@contextlib.contextmanager
def _killed_after(step: int):
  """Kills a run as its trainer starts the step after `step` (whose
  checkpoint is written by then), as a process killed there would be: its
  metrics writers, which Tunix registers with `jax.monitoring` and no one
  closes, go with it."""
  start = progress.ProgressLines.on_train_step_start
  register = jax.monitoring.register_scalar_listener
  listeners = []

  def on_train_step_start(self, train_ctx):
    if train_ctx.train_steps == step:
      raise _Killed()
    start(self, train_ctx)

  def remember(listener):
    listeners.append(listener)
    register(listener)

  try:
    with mock.patch.object(
        progress.ProgressLines, "on_train_step_start", on_train_step_start
    ), mock.patch.object(jax.monitoring, "register_scalar_listener", remember):
      yield
  finally:
    for listener in listeners:
      jax.monitoring.unregister_scalar_listener(listener)


def _smoke(workdir: str, **train):
  config = config_files.get_config("grpo", "smoke")
  config.workdir = workdir
  config.train.update({"max_steps": 2, **train})
  return config


class GrpoRecipeTest(absltest.TestCase):

  def test_smoke_run_reports_resumes_and_refuses_other_settings(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    record = os.path.join(workdir, "checkpoints", fingerprint_lib.FILE_NAME)

    def smoke(**train):
      config = _smoke(workdir, checkpoint_every_n_steps=1, **train)
      config.grpo.beta = 0.04  # A reference model (a copy of the start).
      return config

    failing = smoke()
    # An eval set smaller than eval.num_prompts (which data.num_eval
    # follows by default): it fails after the models are built, and leaves
    # no fingerprint.
    failing.data = ml_collections.ConfigDict(failing.data.to_dict())
    failing.data.num_eval = 4
    with self.assertRaisesRegex(ValueError, r"eval\.num_prompts"):
      grpo.run(failing)
    self.assertFalse(os.path.exists(record))

    # The corrected relaunch runs (its data differs from the failed one's).
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      content = grpo.run(smoke())
    # Every mesh this project enters (`mesh.tunix_context`) is silent.
    ours = [
        f"{w.filename}:{w.lineno}"
        for w in caught
        if "`with mesh:` context manager" in str(w.message)
        and _in_project(w.filename)
    ]
    self.assertEmpty(ours)
    self.assertEqual(content["steps"], 2)
    self.assertTrue(os.path.exists(record))
    for name in ("report.txt", "report.json", "report.png"):
      self.assertTrue(os.path.isfile(os.path.join(workdir, name)), name)
    self.assertTrue(
        os.path.isfile(os.path.join(workdir, "export", bd_config.SETTINGS_FILE))
    )
    names = {
        name
        for name in ("rewards/train/sum", "actor/train/loss", "actor/train/kl")
        if metrics.read_metrics(workdir, name)
    }
    self.assertLen(names, 3, names)
    # Replay parity, checked at global step 0 (every 10 steps).
    parity = metrics.read_metrics(
        workdir, "diffusion/train/rollout_anchor_logp_abs_max"
    )
    self.assertNotEmpty(parity)
    self.assertLessEqual(max(v for _, v in parity), 1e-5)

    straight = {
        (r["name"], r["step"]): r["value"]
        for r in metrics.read_records(workdir)
    }
    # Killed after step 2, before its checkpoint was written: the relaunch
    # resumes from step 1; killed right after step 2's checkpoint, the next
    # resumes from step 2. Each says so, and the metrics hold one row per
    # metric and step: the uninterrupted run's, then step 3's.
    shutil.rmtree(os.path.join(workdir, "checkpoints", "actor", "2"))
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
      with _killed_after(2), self.assertRaises(_Killed):
        grpo.run(smoke(max_steps=3))
      self.assertEqual(grpo.run(smoke(max_steps=3))["steps"], 3)
    for step in (1, 2):
      self.assertIn(
          f"grpo: resumed from step {step} (workdir {workdir})",
          stdout.getvalue(),
      )
    records = metrics.read_records(workdir)
    rows = collections.Counter((r["name"], r["step"]) for r in records)
    self.assertEqual({k: n for k, n in rows.items() if n > 1}, {})
    values = {(r["name"], r["step"]): r["value"] for r in records}
    self.assertEmpty(set(straight) - set(values))
    keys = sorted(straight)
    np.testing.assert_allclose(
        [values[k] for k in keys],
        [straight[k] for k in keys],
        rtol=1e-5,
        atol=1e-6,
    )
    actor = lambda step: {n for n, s in rows if s == step and "actor/" in n}
    self.assertEqual(actor(3), actor(1))
    # A relaunch of a finished run trains no further step.
    self.assertEqual(grpo.run(smoke(max_steps=3))["steps"], 3)

    other = smoke(max_steps=4)
    other.rollout.threshold = 0.9
    with self.assertRaisesRegex(ValueError, r"rollout\.threshold"):
      grpo.run(other)


@absltest.skipUnless(
    compat.ROLLOUT_HAS_DIFFUSION_BATCH,
    "Tunix's GRPOLearner on prepared diffusion rollouts needs the PR stack"
    " #1745-#1749 (wheel google_tunix-0.1.8.dev20260723)",
)
class TunixLearnerTest(absltest.TestCase):

  def test_smoke_trains_through_tunix_s_learner_with_replay_parity(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir, max_steps=1, warmup_steps=0)
    config.grpo.learner = "tunix"
    learners, build = [], wiring.build_grpo

    def build_grpo(*args, **kwargs):
      cluster, learner = build(*args, **kwargs)
      learners.append(learner)
      return cluster, learner

    with mock.patch.object(
        learner_lib.DiffusionGRPOLearner,
        "__init__",
        side_effect=AssertionError("tunix_bd's learner was built"),
    ), mock.patch.object(wiring, "build_grpo", build_grpo):
      content = grpo.run(config)
    self.assertEqual(content["steps"], 1)
    with open(os.path.join(workdir, "report.txt"), encoding="utf-8") as f:
      self.assertStartsWith(f.read(), "GRPO (grpo, Tunix's GRPOLearner) on")
    self.assertIs(type(*learners), compat.GRPOLearner)
    self.assertIsNotNone(learners[0].diffusion_logits_fn)
    # The cluster replays the anchor at global step 0 (every 10 steps).
    name = cluster_lib.PARITY_METRIC.replace("/", "/train/", 1)
    parity = metrics.read_metrics(workdir, name)
    self.assertNotEmpty(parity)
    print(f"{name}: {max(v for _, v in parity):.3g}")
    self.assertLessEqual(max(v for _, v in parity), 1e-5)
    for name in (
        "actor/train/loss",
        "rewards/train/sum",
        "diffusion/train/tokens_per_forward",
    ):
      self.assertNotEmpty(metrics.read_metrics(workdir, name), name)


class _Learner:
  """Trains by advancing the actor trainer's steps."""

  def __init__(self, trainer, steps):
    self.trainer, self.steps, self.batches = trainer, steps, None

  def train(self, batches):
    self.batches = list(batches)
    self.trainer.train_steps += self.steps


def _cluster(max_steps=10):
  training = types.SimpleNamespace(max_steps=max_steps)
  return types.SimpleNamespace(
      actor_trainer=types.SimpleNamespace(train_steps=1),
      cluster_config=types.SimpleNamespace(training_config=training),
  )


_ITEM = {"prompts": np.asarray(["1+1="]), "answer": np.asarray(["2"])}


class TrainTest(absltest.TestCase):

  def test_times_training_alone(self):
    cluster = _cluster()
    learner = _Learner(cluster.actor_trainer, steps=3)
    clock = iter([10.0, 12.5])
    with mock.patch.object(grpo.time, "perf_counter", lambda: next(clock)):
      self.assertEqual(grpo.train(cluster, learner, [_ITEM]), 2.5)
    self.assertEqual(learner.batches, [_ITEM])
    self.assertEqual(cluster.actor_trainer.train_steps, 4)

  def test_items_are_checked_whichever_the_learner(self):
    cluster = _cluster()
    learner = _Learner(cluster.actor_trainer, steps=1)
    bad = {"prompts": ["1+1="]}  # Tunix would repeat a list element-wise.
    with self.assertRaisesRegex(
        ValueError, r"^train dataset item 0: 'prompts'"
    ):
      grpo.train(cluster, learner, [bad])

  def test_a_finished_run_trains_no_further_whichever_the_learner(self):
    cluster = _cluster(max_steps=1)
    learner = _Learner(cluster.actor_trainer, steps=1)
    grpo.train(cluster, learner, [_ITEM])
    self.assertIsNone(learner.batches)
    self.assertEqual(cluster.actor_trainer.train_steps, 1)


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("vocab_filter", "rollout", dict(temperature=0.0), "temperature"),
      ("one_generation", "grpo", dict(num_generations=1), "num_generations"),
      ("loss_algo", "grpo", dict(loss_algo="dapo"), "loss_algo"),
  )
  def test_bad_settings_fail_before_anything_is_written(
      self, section, change, message
  ):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.model.random_init = False
    config.model.checkpoint = self.create_tempdir().full_path
    config.model.reference = ""
    config[section].update(change)
    with self.assertRaisesRegex(ValueError, message):
      grpo.run(config)
    self.assertFalse(os.path.exists(workdir))

  def test_an_export_format_the_model_cannot_fill_is_refused_first(self):
    # The smoke policy is shifted: SDAR's format is same-position.
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.export.format = "sdar"
    with self.assertRaisesRegex(
        ValueError, r"^export\.format='sdar'.*bd\.alignment=same_position"
    ):
      grpo.run(config)
    self.assertFalse(os.path.exists(workdir))

  def _rl_file(self, name, num):
    path = os.path.join(self.create_tempdir().full_path, name)
    with open(path, "w", encoding="utf-8") as f:
      for n in range(num):
        f.write(json.dumps({"prompt": f"sort {n}1", "answer": f"1{n}"}) + "\n")
    return path

  def test_user_prompts_are_never_scored_on_the_embedded_tasks(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.data.prompts = self._rl_file("rl.jsonl", 4)
    with self.assertRaisesRegex(ValueError, r"^data\.eval must be set"):
      grpo.run(config)
    self.assertFalse(os.path.exists(workdir))

  def test_user_held_out_prompts_are_read(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.data.prompts = self._rl_file("rl.jsonl", 4)
    config.data.eval = self._rl_file("held_out.jsonl", 3)
    config.eval.num_prompts = 4  # One more than data.eval holds.
    with self.assertRaisesRegex(
        ValueError, r"^eval\.num_prompts=4 but data\.eval=.* holds 3"
    ):
      grpo.run(config)
    self.assertFalse(os.path.exists(workdir))

  def _converted(self, name, **bd):
    """A directory with a tokenizer and, given `bd`, its BD settings."""
    path = os.path.join(self.create_tempdir().full_path, name)
    tokenizer_lib.build_char_tokenizer().save_pretrained(path)
    if bd:
      bd_config.save_settings(bd_config.BlockDiffusionConfig(**bd), path)
    return path

  def _with_reference(self, workdir, reference):
    config = _smoke(workdir)
    config.model.update(
        random_init=False,
        checkpoint=self._converted("policy", block_size=4, mask_token_id=3),
        reference=reference,
    )
    config.grpo.beta = 0.04
    return config

  def test_the_kl_reference_defaults_to_the_policy(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = config_files.get_config("grpo")  # Its default reference.
    config.workdir = workdir
    policy = self._converted("policy", block_size=4, mask_token_id=3)
    config.model.checkpoint = policy
    stage = grpo.validate(config)
    self.assertEqual(stage.settings.model.reference, policy)
    self.assertEqual(
        grpo.kl_reference(stage, config.grpo.beta),
        f"the initial policy (model.checkpoint={policy!r})",
    )
    other = self._converted("other", block_size=4, mask_token_id=3)
    config.model.reference = other
    stage = grpo.validate(config)
    self.assertEqual(
        grpo.kl_reference(stage, 0.04), f"model.reference={other!r}"
    )
    self.assertEqual(grpo.kl_reference(stage, 0.0), "none (grpo.beta=0)")
    self.assertFalse(os.path.exists(workdir))

  def test_an_ar_reference_is_refused(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    ar_export = self._converted("ar")  # No block_diffusion.json.
    with self.assertRaisesRegex(
        ValueError,
        r"^model\.reference=.* has no block_diffusion\.json: it is not a"
        " block-diffusion checkpoint",
    ):
      grpo.run(self._with_reference(workdir, ar_export))
    self.assertFalse(os.path.exists(workdir))

  @parameterized.named_parameters(
      ("block_size", dict(block_size=8, mask_token_id=3), "block_size=8"),
      ("mask_id", dict(block_size=4, mask_token_id=4), "mask_token_id=4"),
      (
          "alignment",
          dict(block_size=4, mask_token_id=3, alignment="same_position"),
          "alignment='same_position'",
      ),
  )
  def test_a_reference_unlike_the_policy_is_refused(self, bd, message):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    reference = self._converted("reference", **bd)
    with self.assertRaisesRegex(
        ValueError, rf"^model\.reference=.* has {message}, the policy"
    ):
      grpo.run(self._with_reference(workdir, reference))
    self.assertFalse(os.path.exists(workdir))

  def test_a_reference_with_another_tokenizer_is_refused(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    reference = self._converted("reference", block_size=4, mask_token_id=3)
    tokenizer = tokenizer_lib.build_char_tokenizer()
    tokenizer.add_tokens(["<|other|>"], special_tokens=True)
    tokenizer.save_pretrained(reference)
    with self.assertRaisesRegex(
        ValueError, r"^model\.reference=.* has tokenizer='\w+', the policy"
    ):
      grpo.run(self._with_reference(workdir, reference))
    self.assertFalse(os.path.exists(workdir))

  def test_empty_checkpoint_says_it_has_no_tokenizer(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.model.update(
        random_init=False,
        checkpoint=self.create_tempdir().full_path,
        reference="",
    )
    config.grpo.beta = 0.0
    with self.assertRaisesRegex(
        ValueError, r"^model\.checkpoint=.* has no tokenizer"
    ) as raised:
      grpo.run(config)
    self.assertNotIn("sentencepiece", str(raised.exception))
    self.assertFalse(os.path.exists(workdir))

  def test_missing_checkpoint_names_the_key(self):
    workdir = os.path.join(self.create_tempdir().full_path, "grpo")
    config = _smoke(workdir)
    config.model.random_init = False
    config.model.checkpoint = os.path.join(workdir, "missing")
    with self.assertRaisesRegex(ValueError, r"model\.checkpoint"):
      grpo.run(config)
    self.assertFalse(os.path.exists(workdir))


if __name__ == "__main__":
  absltest.main()
