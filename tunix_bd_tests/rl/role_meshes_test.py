# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO through `RLCluster` on role meshes from config, on 8 CPU devices.

Disjoint 4 + 4 meshes (`mesh.rollout.devices=4`): the rollout's copy lives
on the sampler's devices, Tunix syncs it once per global step (different
from the actor's weights before the sync, equal after; on CPU Tunix syncs
under transfer guards, so the copy is device to device), and Tunix may run
rollouts asynchronously; also when the actor's leaves are split otherwise
than the rollout's (norms split over `fsdp`, as the GRPO recipe's train
step returns them, or a rollout mesh of other axis sizes). One shared
device: the rollout decodes with the actor's own weights, so Tunix never
syncs it (docs/design.md "RL invariants" 8 and 9).
And GRPO with the actor on a 2 x 2 `(fsdp, tp)` mesh samples, scores and
updates as on one device.
"""

from tunix_bd_tests import multi_device

if __name__ == "__main__":  # Run alone; under pytest, multi_device_test.
  multi_device.request(8)

# pylint: disable=g-import-not-at-top,g-bad-import-order
import dataclasses
from typing import Any

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec
import numpy as np
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl import utils as rl_utils

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.rl import meshes as meshes_lib
from tunix_bd.rl import role_shim
from tunix_bd.rl import wiring
from tunix_bd_tests.rl import rl_test_common as common
from tunix_bd_tests import test_common

_NUM_DEVICES = 8


class _SyncRecorder:
  """Wraps a rollout's `update_params`: were its weights the actor's?"""

  def __init__(self, rollout):
    self.rollout, self.sync = rollout, rollout.update_params
    self.equal_before, self.equal_after = [], []
    rollout.update_params = self

  def _equal(self, params) -> bool:
    mine = jax.tree.leaves(nnx.state(self.rollout.model(), nnx.Param))
    return all(
        np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(mine, jax.tree.leaves(params))
    )

  def __call__(self, params, filter_types=None):
    self.equal_before.append(self._equal(params))
    self.sync(params, filter_types)
    self.equal_after.append(self._equal(params))


def _cluster(meshes: meshes_lib.RoleMeshes, actor=None):
  actor = common.model(0) if actor is None else actor
  return common.cluster(
      actor=role_shim.place_on_mesh(actor, meshes.actor),
      reference=None,
      max_steps=2,
      engine_kwargs=dict(
          role_to_mesh=wiring.role_to_mesh(
              meshes.actor, meshes.reference, meshes.rollout
          )
      ),
  )


def _length_reward(prompts, completions, **kwargs):
  """Varies across a random policy's samples (exact match would be all 0)."""
  del prompts, kwargs
  return [float(len(c)) for c in completions]


def _train(cluster) -> tuple[Any, _SyncRecorder]:
  """Two GRPO steps; records the syncs of training (not the learner's first)."""
  learner = wiring.build_learner(
      cluster, reward_fns=[_length_reward], num_generations=2, beta=0.0
  )
  recorder = _SyncRecorder(cluster.rollout)
  learner.train(common.dataset(4, 2))
  return learner, recorder


class RoleMeshesTest(multi_device.DeviceTestCase, parameterized.TestCase):
  NUM_DEVICES = _NUM_DEVICES

  @parameterized.named_parameters(
      ("same_axes", {}, False),
      # The actor's 1-D leaves split over fsdp: no rollout shard matches.
      ("actor_norms_split", {}, True),
      ("rollout_axes_differ", dict(fsdp=2, tp=2), False),
  )
  def test_disjoint_meshes_sample_on_their_devices_and_sync_each_step(
      self, rollout_axes, split_norms
  ):
    section = config_utils.to_section(mesh_lib.RoleMeshSettings)
    section.rollout.update(devices=4, **rollout_axes)
    meshes = meshes_lib.build(section)
    # Two KV heads, so that tp = 2 really splits them.
    config = dataclasses.replace(
        test_common.tiny_qwen3_config(tokenizer_lib.VOCAB_SIZE), num_kv_heads=2
    )
    cluster = _cluster(meshes, test_common.init_qwen3(config, 0))
    if split_norms:
      actor = cluster.actor_trainer.model
      split = NamedSharding(meshes.actor, PartitionSpec("fsdp"))
      nnx.update(
          actor,
          jax.tree.map(
              lambda x: jax.device_put(x, split) if x.ndim == 1 else x,
              nnx.state(actor, nnx.Param),
          ),
      )
    self.assertEqual(
        test_common.device_ids(nnx.state(cluster.rollout.model())), [4, 5, 6, 7]
    )
    self.assertEqual(
        test_common.device_ids(nnx.state(cluster.actor_trainer.model)),
        [0, 1, 2, 3],
    )
    self.assertEqual(cluster.r2m[rl_cluster_lib.Role.ROLLOUT], meshes.rollout)
    rollout_shardings = jax.tree.map(
        lambda x: x.sharding, nnx.state(cluster.rollout.model(), nnx.Param)
    )
    learner, syncs = _train(cluster)
    self.assertTrue(learner.should_sync_weights)
    self.assertTrue(learner.can_enable_async_rollout)
    self.assertEqual(cluster.global_steps, 2)
    self.assertEqual(syncs.equal_before, [False, False])
    self.assertEqual(syncs.equal_after, [True, True])
    # The rollout's weights stay placed as its mesh says.
    self.assertEqual(
        jax.tree.map(
            lambda x: x.sharding, nnx.state(cluster.rollout.model(), nnx.Param)
        ),
        rollout_shardings,
    )

  def test_one_shared_device_shares_the_actor_and_never_syncs(self):
    meshes = meshes_lib.build(
        config_utils.to_section(mesh_lib.MeshSettings), jax.devices()[:1]
    )
    self.assertIs(meshes.rollout, meshes.actor)
    cluster = _cluster(meshes)
    self.assertTrue(
        rl_utils.is_sharing_weights(
            cluster.actor_trainer.model, cluster.rollout.model()
        )
    )
    learner, syncs = _train(cluster)
    self.assertFalse(learner.should_sync_weights)
    self.assertFalse(learner.can_enable_async_rollout)
    self.assertEqual(cluster.global_steps, 2)
    self.assertEqual(syncs.equal_before, [])

  def test_grpo_on_a_2x2_actor_mesh_equals_one_device(self):
    # Two KV heads, so that tp = 2 really splits them.
    config = dataclasses.replace(
        test_common.tiny_qwen3_config(tokenizer_lib.VOCAB_SIZE), num_kv_heads=2
    )
    learning_rate, steps = 1e-3, 2
    metrics, params = {}, {}
    for fsdp, tp in ((1, 1), (2, 2)):
      section = config_utils.to_section(mesh_lib.MeshSettings)
      section.update(fsdp=fsdp, tp=tp)
      meshes = meshes_lib.build(section, jax.devices()[: fsdp * tp])
      actor = test_common.init_qwen3(config, 0)
      cluster = common.cluster(
          actor=role_shim.place_on_mesh(actor, meshes.actor),
          reference=None,
          max_steps=steps,
          learning_rate=learning_rate,
          engine_kwargs=dict(
              role_to_mesh=wiring.role_to_mesh(
                  meshes.actor, meshes.reference, meshes.rollout
              )
          ),
      )
      trained = cluster.actor_trainer.model
      self.assertLen(test_common.device_ids(nnx.state(trained)), fsdp * tp)
      _train(cluster)
      logger = cluster._rl_metrics_logger  # pylint: disable=protected-access
      metrics[fsdp, tp] = {
          f"{prefix}/{name}": logger.get_metric_history(prefix, name, "train")
          for prefix, name in (
              ("actor", "loss"),
              ("actor", "grad_norm"),
              ("rewards", "score/mean"),
              ("rewards", "score/max"),
          )
      }
      params[fsdp, tp] = np.concatenate([
          np.ravel(x)
          for x in jax.tree.leaves(nnx.state(cluster.actor_trainer.model))
      ])
    # Same samples (rewards), same gradients, step after step.
    self.assertLen(metrics[1, 1]["actor/grad_norm"], steps)
    self.assertGreater(min(metrics[1, 1]["actor/grad_norm"]), 0)
    for name, want in metrics[1, 1].items():
      np.testing.assert_allclose(
          metrics[2, 2][name], want, rtol=1e-5, atol=1e-6, err_msg=name
      )
    # AdamW moves an element whose gradient is ~0 by about lr * sign(g), so
    # rounding noise in such a gradient may move it by up to 2 lr a step;
    # every other element agrees to 1e-5.
    diff = np.abs(params[2, 2] - params[1, 1])
    self.assertLessEqual(diff.max(), 2 * learning_rate * steps)
    self.assertLess(np.mean(diff > 1e-5), 1e-3)


if __name__ == "__main__":
  absltest.main()
