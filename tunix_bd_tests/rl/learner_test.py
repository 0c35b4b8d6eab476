# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO through Tunix's loop on diffusion traces.

docs/design.md "RL invariants" 3 (first micro-batch on-policy), 5
(reference replay: KL 0 at equal weights, > 0 after an update), 8 (no
sync on one mesh), 10 (an end-to-end smoke: finite losses, ratio 1,
clip fraction 0, checkpoint with the fingerprint), 11 (the replay-parity
metric) and docs/design.md invariant 7 (resumed == uninterrupted), plus
the learner's fail-closed checks.
"""

import copy
import functools
import os

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from orbax import checkpoint as ocp
from tunix.rl import rl_cluster as rl_cluster_lib

from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.rl import cluster as cluster_lib
from tunix_bd.rl import learner as learner_lib
from tunix_bd.rl import rollout as rollout_lib
from tunix_bd.rl import wiring
from tunix_bd_tests.rl import rl_test_common as common

Mode = rl_cluster_lib.Mode


class CountingRollout(rollout_lib.DiffusionRollout):
  """Counts weight syncs (Tunix calls `update_params` once per sync)."""

  def __init__(self, **kwargs):
    self.syncs = 0
    super().__init__(**kwargs)

  def update_params(self, params, filter_types=None):
    self.syncs += 1
    super().update_params(params, filter_types)


def _rebuild(engine, *, checkpoint_dir=None, max_steps=3, **training):
  base = common.cluster(
      reference="same",
      checkpoint_dir=checkpoint_dir,
      max_steps=max_steps,
      **training,
  )
  return cluster_lib.DiffusionRLCluster(
      actor=common.model(0),
      reference=common.model(0),
      tokenizer=common.tokenizer(),
      cluster_config=rl_cluster_lib.ClusterConfig(
          role_to_mesh=base.cluster_config.role_to_mesh,
          rollout_engine=engine,
          training_config=base.cluster_config.training_config,
          rollout_config=base.cluster_config.rollout_config,
      ),
      fingerprint={"run": "test"},
  )


def _history(cluster, prefix, name):
  logger = cluster._rl_metrics_logger  # pylint: disable=protected-access
  return np.asarray(logger.get_metric_history(prefix, name, "train"))


def _train(cluster, *, steps_of_data=4, **algo):
  learner = wiring.build_learner(
      cluster,
      reward_fns=[common.char_reward],
      num_generations=algo.pop("num_generations", 4),
      **algo,
  )
  learner.train(common.dataset(2 * steps_of_data, 2))
  return learner


class EndToEndTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.ckpt = os.path.join(absltest.get_default_test_tmpdir(), "e2e")
    engine = functools.partial(
        CountingRollout,
        **common.cluster(reference=None).cluster_config.rollout_engine.keywords,
    )
    cls.cluster = _rebuild(
        engine,
        checkpoint_dir=cls.ckpt,
        max_steps=3,
        checkpointing_options=ocp.CheckpointManagerOptions(
            save_interval_steps=1, max_to_keep=5
        ),
    )
    cls.cluster.rollout.syncs = 0  # Count the syncs of training alone.
    cls.learner = _train(cls.cluster, beta=0.04, num_iterations=1)

  def test_three_updates_with_finite_losses_and_gradients(self):
    losses = _history(self.cluster, "actor", "loss")
    self.assertLen(losses, 3)
    self.assertTrue(np.isfinite(losses).all())
    self.assertTrue((_history(self.cluster, "actor", "grad_norm") > 0).all())

  def test_single_update_per_rollout_is_exactly_on_policy(self):
    np.testing.assert_array_equal(
        _history(self.cluster, "actor", "is_ratio/mean"), 1.0
    )
    np.testing.assert_array_equal(
        _history(self.cluster, "actor", "pg_clipfrac"), 0.0
    )

  def test_reference_kl_is_zero_first_then_positive(self):
    kl = _history(self.cluster, "actor", "kl")
    # Reference and live replays are separate programs: equal to rounding.
    self.assertLess(abs(kl[0]), 1e-6)
    self.assertGreater(np.abs(kl[1:]).max(), 0.0)

  def test_one_mesh_shares_the_actor_and_never_syncs(self):
    self.assertEqual(self.cluster.global_steps, 3)
    self.assertFalse(self.learner.should_sync_weights)
    self.assertEqual(self.cluster.rollout.syncs, 0)

  def test_checkpoint_holds_the_fingerprint(self):
    metadata = self.cluster.actor_trainer.custom_checkpoint_metadata()
    self.assertEqual(metadata[fingerprint_lib.METADATA_KEY], {"run": "test"})
    self.assertIn("global_step", metadata)
    saved = os.listdir(os.path.join(self.ckpt, "actor"))
    self.assertIn("3", saved)

  def test_rewards_and_tokens_per_forward_are_logged(self):
    rewards = _history(self.cluster, "rewards", "score/mean")
    self.assertTrue(np.isfinite(rewards).all())
    tpf = _history(self.cluster, "diffusion", "tokens_per_forward")
    self.assertTrue((tpf > 0).all())


class OldPolicyTest(absltest.TestCase):

  def test_two_iterations_replay_the_anchor_and_start_on_policy(self):
    # GSPO-token's ratios at the first micro-batch: policy_loss_test.py. The
    # tokenizer has no EOS token: the explicit stop ids are enough.
    tokenizer = copy.deepcopy(common.tokenizer())
    stop_id = tokenizer.eos_token_id
    tokenizer.eos_token = None
    self.assertIsNone(tokenizer.eos_token_id)
    cluster = common.cluster(
        reference=None,
        max_steps=4,
        stop_ids=(stop_id,),
        engine_kwargs=dict(tokenizer=tokenizer),
    )
    self.assertEqual(cluster.rollout.eos_id(), stop_id)
    _train(cluster, beta=0.0, num_iterations=2)
    self.assertTrue(np.isfinite(_history(cluster, "actor", "loss")).all())
    parity = _history(cluster, "diffusion", "rollout_anchor_logp_abs_max")
    self.assertNotEmpty(parity)
    self.assertLessEqual(parity.max(), 1e-5)
    ratio = _history(cluster, "actor", "is_ratio/mean")
    clip = _history(cluster, "actor", "pg_clipfrac")
    # Updates 0, 2: first use of a rollout (live == anchor); 1, 3: moved.
    np.testing.assert_allclose(ratio[0::2], 1.0, atol=1e-6)
    np.testing.assert_allclose(clip[0::2], 0.0, atol=1e-6)
    self.assertGreater(np.abs(ratio[1::2] - 1.0).max(), 0.0)

  def test_later_mini_batches_sample_the_updated_actor(self):
    # On one mesh the rollout is the live actor: each mini-batch's rollout
    # is on-policy at its first update, and the anchor replays it.
    cluster = common.cluster(
        reference=None,
        max_steps=4,
        mini_batch_size=2,
        train_micro_batch_size=2,
    )
    learner = wiring.build_learner(
        cluster, reward_fns=[common.char_reward], num_generations=4, beta=0.0
    )
    learner.train(common.dataset(8, 4))
    self.assertEqual(cluster.global_steps, 2)
    self.assertEqual(cluster.actor_trainer.train_steps, 4)
    parity = _history(cluster, "diffusion", "rollout_anchor_logp_abs_max")
    self.assertNotEmpty(parity)
    self.assertLessEqual(parity.max(), 1e-5)
    ratio = _history(cluster, "actor", "is_ratio/mean")
    np.testing.assert_allclose(ratio, 1.0, atol=1e-6)


class ResumeTest(absltest.TestCase):

  def test_resumed_run_equals_uninterrupted(self):
    options = ocp.CheckpointManagerOptions(save_interval_steps=1, max_to_keep=5)
    # One step, a checkpoint, one more: the step after the restore runs on
    # the restored weights, optimizer moments, data position and seeds.
    whole = common.cluster(reference=None, max_steps=2)
    _train(whole, beta=0.0)
    ckpt = os.path.join(absltest.get_default_test_tmpdir(), "resume")
    first = common.cluster(
        reference=None,
        max_steps=1,
        checkpoint_dir=ckpt,
        checkpointing_options=options,
    )
    _train(first, beta=0.0)
    resumed = common.cluster(
        reference=None,
        max_steps=2,
        checkpoint_dir=ckpt,
        checkpointing_options=options,
    )
    learner = _train(resumed, beta=0.0)
    self.assertEqual(learner.rl_cluster.global_steps, 2)
    resumed_losses = _history(resumed, "actor", "loss")
    self.assertLen(resumed_losses, 1)
    np.testing.assert_allclose(
        resumed_losses, _history(whole, "actor", "loss")[1:], atol=1e-6
    )


class FailClosedTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Each refusal comes before the learner touches the cluster: one serves.
    cls.cluster = common.cluster(reference=None)

  def test_stock_policy_loss_is_refused(self):
    with self.assertRaisesRegex(ValueError, "autoregressively"):
      learner_lib.DiffusionGRPOLearner(
          self.cluster,
          compat.GRPOConfig(num_generations=2, beta=0.0),
          [common.char_reward],
      )

  def test_beta_without_reference_is_refused(self):
    # Asked through Tunix's public `InferenceWorker.get_model`.
    self.assertFalse(self.cluster.has_reference())
    self.assertTrue(common.cluster().has_reference())
    with self.assertRaisesRegex(ValueError, "reference"):
      wiring.build_learner(
          self.cluster,
          reward_fns=[common.char_reward],
          num_generations=2,
          beta=0.04,
      )

  def test_packing_is_refused(self):
    cluster = common.cluster(reference=None, max_seq_token_per_tpu=64)
    with self.assertRaisesRegex(ValueError, "packing"):
      wiring.build_learner(
          cluster,
          reward_fns=[common.char_reward],
          num_generations=2,
          beta=0.0,
      )

  def test_one_generation_is_refused(self):
    with self.assertRaisesRegex(ValueError, "num_generations"):
      wiring.build_learner(
          self.cluster,
          reward_fns=[common.char_reward],
          num_generations=1,
          beta=0.0,
      )

  @parameterized.named_parameters(
      (
          "list_prompts",
          lambda d: dict(d, prompts=list(d["prompts"])),
          "np.ndarray of str",
      ),
      ("short_answer", lambda d: dict(d, answer=d["answer"][:1]), "answer"),
      (
          "token_prompts",
          lambda d: dict(d, prompts=np.zeros((2, 3))),
          "np.ndarray of str",
      ),
  )
  def test_bad_dataset_items_are_refused_before_any_rollout(
      self, corrupt, message
  ):
    item = common.dataset(2, 2)[0]
    with self.assertRaisesRegex(ValueError, message):
      learner_lib.check_dataset_item(corrupt(item), "train dataset item 0")


if __name__ == "__main__":
  absltest.main()
