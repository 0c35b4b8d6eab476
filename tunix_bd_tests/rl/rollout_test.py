# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The diffusion rollout inside Tunix's `RLCluster`.

docs/design.md invariants 6 (replay parity, early-stopped rows
included) and 5 (batch invariance through the rollout), and "RL
invariants" 1 (stop handling), 6 (RNG by step and mode, eval isolated), 7
(fail closed) and 8 (on one mesh, the actor's live weights) on a tiny Qwen3.
"""

import collections
import dataclasses
import functools

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.rl import rl_cluster as rl_cluster_lib

from tunix_bd.core import cached_logits
from tunix_bd.core import eos
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as generate_settings
from tunix_bd.rl import cluster as cluster_lib
from tunix_bd.rl import rollout as rollout_lib
from tunix_bd.rl import wiring
from tunix_bd_tests.rl import rl_test_common as common

Mode = rl_cluster_lib.Mode


def _prompts(num=6):
  (item,) = common.dataset(num, num)
  return list(item["prompts"])


def _generate(cluster, prompts, step=0, mode=Mode.TRAIN):
  cluster.global_steps = step
  return cluster.generate(prompts, mode=mode)


@functools.cache
def _frequent_token() -> int:
  """A token the tiny policy commits mid-completion (to stop rows early)."""
  out = _generate(common.cluster(reference=None), _prompts())
  tokens = np.asarray(out.trace.tokens)[:, 1:-1].ravel()
  return int(collections.Counter(tokens.tolist()).most_common(1)[0][0])


class TraceTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    stops = (common.tokenizer().eos_token_id, _frequent_token())
    cls.cluster = common.cluster(stop_ids=stops)
    cls.out = _generate(cls.cluster, _prompts())
    cls.stops = stops

  def test_some_rows_stop_early(self):
    steps = np.asarray(self.out.trace.action_step)
    self.assertTrue((steps < 0).any(), "no row stopped early; pick a stop")

  def test_anchor_replay_matches_the_rollout(self):
    trace = self.out.trace
    old = self.cluster.anchor_replay_logps(trace)
    generated = np.asarray(trace.action_step) >= 0
    error = np.abs(old - np.asarray(trace.action_logp))[generated]
    self.assertLessEqual(error.max(), 1e-5)
    np.testing.assert_array_equal(old[~generated], 0.0)

  def test_reference_replay_at_equal_weights_is_the_rollout(self):
    trace = self.out.trace
    ref = self.cluster.reference_replay_logps(trace, micro_batch_size=4)
    generated = np.asarray(trace.action_step) >= 0
    np.testing.assert_allclose(
        ref[generated], np.asarray(trace.action_logp)[generated], atol=1e-5
    )

  def test_visible_completion_stops_at_first_stop_but_trace_keeps_block(self):
    trace, out = self.out.trace, self.out
    tokens = np.asarray(trace.tokens)
    steps = np.asarray(trace.action_step)
    visible = eos.truncate_at_stop(tokens, self.stops)
    tok = common.tokenizer()
    post_stop_actions = 0
    for r, row in enumerate(visible):
      np.testing.assert_array_equal(out.tokens[r], row)
      self.assertEqual(out.text[r], tok.decode(row.tolist()))
      post_stop_actions += int((steps[r, len(row) + 1 :] >= 0).sum())
    self.assertGreater(post_stop_actions, 0)
    self.assertEqual(out.num_forwards.shape, (len(visible),))

  def test_prompts_are_left_padded_like_tunix(self):
    prompt_ids = self.out.left_padded_prompt_tokens
    self.assertEqual(prompt_ids.shape[1], common.MAX_PROMPT_LENGTH)
    lengths = np.asarray(self.out.trace.prompt_lengths)
    pad = common.tokenizer().pad_token_id
    for row, n in zip(prompt_ids, lengths):
      self.assertTrue((row[: len(row) - n] == pad).all())


class SeedTest(absltest.TestCase):

  def test_same_step_and_mode_give_the_same_rollout(self):
    a = _generate(common.cluster(reference=None), _prompts(), step=7)
    b = _generate(common.cluster(reference=None), _prompts(), step=7)
    c = _generate(common.cluster(reference=None), _prompts(), step=8)
    np.testing.assert_array_equal(a.trace.tokens, b.trace.tokens)
    self.assertFalse(np.array_equal(a.trace.tokens, c.trace.tokens))

  def test_eval_does_not_advance_the_training_stream(self):
    prompts = _prompts()
    plain = common.cluster(reference=None)
    _generate(plain, prompts, step=3)
    second = _generate(plain, prompts, step=3)
    with_eval = common.cluster(reference=None, temperature=1.0)
    _generate(with_eval, prompts, step=3)
    _generate(with_eval, prompts, step=3, mode=Mode.EVAL)
    second_after_eval = _generate(with_eval, prompts, step=3)
    np.testing.assert_array_equal(
        second.trace.tokens, second_after_eval.trace.tokens
    )

  def test_train_and_eval_seeds_differ(self):
    train = rollout_lib.row_seeds(0, "train", 5, 0, 4)
    evaluation = rollout_lib.row_seeds(0, "eval", 5, 0, 4)
    self.assertFalse(np.intersect1d(train, evaluation).size)

  def test_a_row_decodes_alone_as_in_its_batch(self):
    cluster = common.cluster(reference=None)
    prompts = _prompts()  # The other tests' batch: their compiled decoder.
    batch = _generate(cluster, prompts, step=2)
    seeds = rollout_lib.row_seeds(0, "train", 2, 0, len(prompts))
    rollout = cluster.rollout
    config = rollout.denoise_config(cluster.get_rollout_config(Mode.TRAIN))
    denoiser = denoise.Denoiser(rollout.model(), bd=common.bd(), config=config)
    tok = common.tokenizer()
    for r in (0, 3):
      ids = tok.encode(prompts[r], add_special_tokens=False)
      alone = denoiser([ids], seeds=seeds[r : r + 1])
      np.testing.assert_array_equal(
          alone.trace.tokens[0], batch.trace.tokens[r]
      )
      np.testing.assert_allclose(
          alone.trace.action_logp[0], batch.trace.action_logp[r], atol=1e-5
      )


_CALLS = collections.Counter()


def _constrained_model_call(*args, sharding, **kwargs):
  """The default cached model call, pinned to `sharding`, counting traces."""
  _CALLS["traced"] += 1
  logits, cache = cached_logits.block_logits_with_cache(*args, **kwargs)
  return jax.lax.with_sharding_constraint(logits, sharding), cache


class ModelCallTest(absltest.TestCase):

  def test_custom_model_call_is_rebound_and_drives_rollout_and_replay(self):
    devices = np.asarray(jax.devices()[:1]).reshape(1, 1)
    foreign = jax.sharding.Mesh(devices, ("fsdp", "tp"))  # Not the role's.
    call = functools.partial(
        _constrained_model_call,
        sharding=jax.sharding.NamedSharding(
            foreign, jax.sharding.PartitionSpec()
        ),
    )
    cluster = common.cluster(engine_kwargs=dict(cached_logits_fn=call))
    rollout = cluster.rollout
    bound = rollout.cached_logits_fn.keywords["sharding"].mesh
    self.assertIs(bound, cluster.r2m[rl_cluster_lib.Role.ROLLOUT])
    _CALLS.clear()
    out = _generate(cluster, _prompts(2))
    self.assertGreater(_CALLS["traced"], 0)
    _CALLS.clear()
    old = cluster.anchor_replay_logps(out.trace)
    self.assertGreater(_CALLS["traced"], 0)
    generated = np.asarray(out.trace.action_step) >= 0
    np.testing.assert_allclose(
        old[generated], np.asarray(out.trace.action_logp)[generated], atol=1e-5
    )


class SharedWeightsTest(absltest.TestCase):

  def test_one_mesh_decodes_with_the_actor_s_live_weights(self):
    cluster = common.cluster(reference=None, max_steps=1)
    actor, rollout = cluster.actor_trainer.model, cluster.rollout
    self.assertTrue(rollout.shares_actor)
    self.assertIs(rollout.model(), actor)  # Nothing copied.
    prompts = _prompts(4)
    # Step 7's first rollout (its seeds) under the initial weights.
    before = _generate(common.cluster(reference=None), prompts, step=7)
    learner = wiring.build_learner(
        cluster, reward_fns=[common.char_reward], num_generations=2, beta=0.0
    )
    self.assertFalse(learner.should_sync_weights)  # Tunix skips the sync.
    learner.train(common.dataset(2, 2))  # One optimizer step.
    self.assertEqual(cluster.actor_trainer.train_steps, 1)
    after = _generate(cluster, prompts, step=7)
    # A fresh rollout on a copy of the updated weights decodes the same.
    updated = common.model(0)
    nnx.update(updated, jax.tree.map(jnp.copy, nnx.state(actor)))
    fresh = _generate(
        common.cluster(actor=updated, reference=None), prompts, step=7
    )
    for name in ("tokens", "action_step", "action_logp"):
      np.testing.assert_array_equal(
          getattr(after.trace, name), getattr(fresh.trace, name), name
      )
    self.assertFalse(
        np.array_equal(before.trace.action_logp, after.trace.action_logp)
    )
    # The anchor is the live actor, the policy that sampled.
    old = cluster.anchor_replay_logps(after.trace)
    generated = np.asarray(after.trace.action_step) >= 0
    error = np.abs(old - np.asarray(after.trace.action_logp))[generated]
    self.assertLessEqual(error.max(), 1e-5)
    # Syncing is a no-op from the actor, refused from another model.
    rollout.update_params(nnx.state(actor, nnx.Param))
    with self.assertRaisesRegex(ValueError, "live weights"):
      rollout.update_params(nnx.state(updated, nnx.Param))


class FailClosedTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # The valid cluster the refusals below start from: what a test sets (a
    # generation context, a step) the next call sets anew.
    cls.cluster = common.cluster(reference=None)

  @parameterized.named_parameters(
      ("vocab_top_p", dict(top_p=0.9), "top_p"),
      ("vocab_top_k", dict(top_k=5), "top_k"),
      ("greedy_training", dict(temperature=0.0), "temperature"),
      ("eos_tokens", dict(eos_tokens=[3]), "eos_tokens"),
  )
  def test_bad_train_rollout_config(self, change, message):
    configs = common.wiring.rollout_configs(
        generate_settings.GrpoRollout(
            max_new_tokens=4,
            max_prompt_length=common.MAX_PROMPT_LENGTH,
            temperature=1.0,
        )
    )
    configs[Mode.TRAIN] = dataclasses.replace(configs[Mode.TRAIN], **change)
    with self.assertRaisesRegex(ValueError, message):
      common.cluster(engine_kwargs=dict(rollout_config=configs))

  @parameterized.named_parameters(
      ("duplicate", lambda t: (t.eos_token_id, t.eos_token_id), "duplicates"),
      ("pad", lambda t: (t.eos_token_id, t.pad_token_id), "pad id"),
      ("mask", lambda t: (common.bd().mask_token_id,), "mask"),
  )
  def test_bad_stop_ids(self, stops, message):
    with self.assertRaisesRegex(ValueError, message):
      common.cluster(stop_ids=stops(common.tokenizer()))

  def test_the_rollout_decodes_with_the_denoise_config_it_is_given(self):
    decode = dataclasses.replace(
        self.cluster.rollout.decode, rule="top_k", top_k=2, use_cache=False
    )
    cluster = common.cluster(reference=None, engine_kwargs=dict(decode=decode))
    self.assertIs(cluster.rollout.decode, decode)
    for mode, temperature in ((Mode.TRAIN, 1.0), (Mode.EVAL, 0.0)):
      self.assertEqual(  # Each mode's lengths and temperature, else as is.
          cluster.rollout.denoise_config(cluster.get_rollout_config(mode)),
          dataclasses.replace(decode, temperature=temperature),
      )

  def test_decode_must_be_a_denoise_config(self):
    with self.assertRaisesRegex(ValueError, "decode must be a DenoiseConfig"):
      common.cluster(engine_kwargs=dict(decode=dict(rule="top_k", top_k=2)))

  def test_token_scoring_is_refused(self):
    cluster = self.cluster
    with self.assertRaisesRegex(ValueError, "scored from its trace"):
      cluster.get_old_per_token_logps(np.zeros((1, 4)), np.zeros((1, 4)))

  def test_generate_needs_the_diffusion_cluster(self):
    rollout = self.cluster.rollout
    config = self.cluster.get_rollout_config(Mode.TRAIN)
    rollout._local.context = None  # A thread that set no context.
    with self.assertRaisesRegex(ValueError, "DiffusionRLCluster"):
      rollout.generate(_prompts(1), config)

  def test_list_prompt_element_is_refused(self):
    cluster = self.cluster
    cluster.rollout.set_generation_context(global_step=0, mode=Mode.TRAIN)
    config = cluster.get_rollout_config(Mode.TRAIN)
    with self.assertRaisesRegex(ValueError, "not a rendered string"):
      cluster.rollout.generate([["sort 21"]], config)

  def test_long_prompt_names_the_setting(self):
    with self.assertRaisesRegex(ValueError, "rollout.max_prompt_length"):
      _generate(self.cluster, ["x" * (common.MAX_PROMPT_LENGTH + 1)])

  def test_non_finite_logits_fail(self):
    actor = common.model(0)
    # A NaN output head poisons every logit.
    actor.lm_head.w.set_value(actor.lm_head.w.get_value() * np.nan)
    cluster = common.cluster(actor=actor, reference=None)
    with self.assertRaisesRegex(ValueError, "finite"):
      _generate(cluster, _prompts())

  @parameterized.named_parameters(
      ("offload", dict(offload_to_cpu=True), "offload_to_cpu"),
      ("foreign_engine", dict(rollout_engine="vanilla"), "DiffusionRollout"),
  )
  def test_cluster_settings_are_refused(self, change, message):
    config = self.cluster.cluster_config
    with self.assertRaisesRegex(ValueError, message):
      cluster_lib.DiffusionRLCluster(
          actor=common.model(0),
          reference=None,
          tokenizer=common.tokenizer(),
          cluster_config=dataclasses.replace(config, **change),
      )


if __name__ == "__main__":
  absltest.main()
