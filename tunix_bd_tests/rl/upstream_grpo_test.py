# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's rollout scored by Tunix's own diffusion RL stack (a peer).

`tunix.rl.diffusion` and `RolloutOutput.diffusion_batch` (the open PR stack
#1745-#1749, wheel 0.1.8.dev20260723) are written by others; where they
are installed they are an oracle. `DiffusionRollout` returns the trace as
Tunix's prepared batch (`replay.diffusion_batch`); Tunix's
`compute_diffusion_per_token_logps` with tunix_bd's replay as the
`DiffusionLogitsFn` (`replay.ReplayLogitsFn`) reproduces the recorded
log-probs, eagerly and through `RLCluster`'s jitted reference scoring, also
for a model call brought as a `DiffusionLogitsFn` (`external_logits`);
and Tunix's own `GRPOLearner`, with no tunix_bd learner, trains on the
rollouts and logs the replay-parity metric.
"""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix_bd import compat
from tunix_bd.core import external_logits
from tunix_bd.core import replay
from tunix_bd_tests.core import external_logits_test
from tunix_bd_tests.rl import rl_test_common as common

try:
  from tunix.rl import diffusion as tunix_rl_diffusion
except ImportError:  # google-tunix 0.1.7, Tunix main.
  tunix_rl_diffusion = None

_SKIP = (
    "the installed Tunix has no tunix.rl.diffusion (the PR stack"
    " #1745-#1749, wheel google_tunix-0.1.8.dev20260723)"
)
_TEMPERATURE = 1.0


def _calls(kind):
  if kind == "own":
    return {}
  fn = external_logits_test.qwen3_logits_fn(common.bd().block_size)
  return external_logits.model_calls(fn)


@absltest.skipIf(tunix_rl_diffusion is None, _SKIP)
class PreparedRolloutTest(parameterized.TestCase):

  @parameterized.parameters("own", "external")
  def test_tunix_scoring_reproduces_the_recorded_log_probs(self, kind):
    calls = _calls(kind)
    cluster = common.cluster(
        reference="same", temperature=_TEMPERATURE, engine_kwargs=calls
    )
    cluster.global_steps = 0
    (item,) = common.dataset(4, 4)
    out = cluster.generate(
        list(item["prompts"]), mode=rl_cluster_lib.Mode.TRAIN
    )
    trace, batch = out.trace, out.diffusion_batch
    self.assertIsInstance(batch, compat.tunix_diffusion.DiffusionTokenBatch)
    for name in replay.TRACE_INPUTS:
      np.testing.assert_array_equal(
          batch.model_inputs[name], getattr(trace, name)
      )
    steps = np.asarray(trace.action_step)
    generated = steps >= 0
    np.testing.assert_array_equal(batch.target_ids, trace.tokens)
    np.testing.assert_array_equal(batch.loss_weights, generated)
    np.testing.assert_array_equal(np.stack(out.logprobs), trace.action_logp)

    logits_fn = replay.ReplayLogitsFn(common.bd())
    if calls:
      logits_fn = replay.ReplayLogitsFn(common.bd(), calls["cached_logits_fn"])
    recorded = np.asarray(trace.action_logp)
    eager = tunix_rl_diffusion.compute_diffusion_per_token_logps(
        cluster.rollout.model(), batch, logits_fn, temperature=_TEMPERATURE
    )
    jitted = cluster.get_ref_diffusion_per_token_logps(
        batch=batch,
        logits_fn=logits_fn,
        micro_batch_size=2,
        temperature=_TEMPERATURE,
    )
    for logps in (np.asarray(eager), np.asarray(jitted)):
      self.assertLessEqual(np.abs(logps - recorded)[generated].max(), 1e-5)
      np.testing.assert_array_equal(logps[~generated], 0.0)


def _varied_reward(prompts, completions, **kwargs):
  """Differs between samples (the tiny policy never earns `char_reward`)."""
  del prompts, kwargs
  return [float(sum(map(ord, c)) % 7) for c in completions]


@absltest.skipIf(tunix_rl_diffusion is None, _SKIP)
class UpstreamLearnerTest(absltest.TestCase):

  def test_tunix_grpo_trains_on_the_prepared_rollouts(self):
    cluster = common.cluster(reference=None, max_steps=2)
    learner = compat.GRPOLearner(
        rl_cluster=cluster,
        algo_config=compat.grpo_config(
            num_generations=2, num_iterations=2, beta=0.0
        ),
        reward_fns=[_varied_reward],
        diffusion_logits_fn=replay.ReplayLogitsFn(common.bd()),
    )
    learner.train(common.dataset(4, 2))
    logger = cluster._rl_metrics_logger  # pylint: disable=protected-access
    history = lambda prefix, name: np.asarray(
        logger.get_metric_history(prefix, name, "train")
    )
    parity = history("diffusion", "rollout_anchor_logp_abs_max")
    self.assertNotEmpty(parity)
    self.assertLessEqual(parity.max(), 1e-5)
    # At ratio 1 GRPO's loss is 0 (advantages sum to 0 per group); its
    # gradient is not.
    grad_norms = history("actor", "grad_norm")
    self.assertNotEmpty(grad_norms)
    self.assertTrue(np.isfinite(grad_norms).all())
    self.assertGreater(grad_norms.max(), 0.0)


if __name__ == "__main__":
  absltest.main()
