# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.generate.step: one denoising step, on its own."""

from __future__ import annotations

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import diffusion_lm
from tunix_bd.core import rng
from tunix_bd.core import scoring
from tunix_bd.generate import commit_rules
from tunix_bd.generate import step as step_lib

_BATCH, _BLOCK, _VOCAB, _MASK = 3, 5, 11, 4


def _block(seed):
  draws = np.random.default_rng(seed)
  logits = 3.0 * draws.standard_normal((_BATCH, _BLOCK, _VOCAB))
  logits[..., _MASK] = diffusion_lm.MASKED_LOGIT
  steps = np.where(draws.random((_BATCH, _BLOCK)) < 0.3, 0, -1).astype(np.int32)
  tokens = np.where(steps >= 0, 7, _MASK).astype(np.int32)
  logp = np.where(steps >= 0, -0.5, 0.0).astype(np.float32)
  eligible = steps < 0
  eligible[2] = False  # A row that no longer decodes.
  return logits.astype(np.float32), tokens, steps, logp, eligible


_step = jax.jit(step_lib.denoise_step)


def _params(rule="threshold", temperature=0.0, threshold=0.5):
  settings = commit_rules.CommitSettings(
      rule=rule, threshold=threshold, top_k=2, factor=1.0
  )
  return step_lib.CommitParams.create(settings, temperature)


class DenoiseStepTest(parameterized.TestCase):

  @parameterized.product(rule=commit_rules.RULES, temperature=(0.0, 0.7))
  def test_step_equals_a_brute_force_reference(self, rule, temperature):
    logits, tokens, steps, logp, eligible = _block(0)
    keys = rng.keys(jnp.arange(_BATCH, dtype=jnp.uint32))
    params = _params(rule, temperature)
    out = _step(logits, tokens, steps, logp, eligible, params, keys, 1)
    scale = 1.0 if temperature == 0 else temperature
    log_probs = np.asarray(scoring.log_probs(logits, scale))
    confidence = np.exp(log_probs.max(axis=-1))
    want_commit = np.asarray(
        commit_rules.commit_mask(
            rule, confidence, eligible, threshold=0.5, top_k=2, factor=1.0
        )
    )
    np.testing.assert_array_equal(out.commit, want_commit)
    self.assertTrue(want_commit[:2].any(axis=1).all())  # Forced progress.
    self.assertFalse(np.asarray(out.commit)[2].any())
    for b in range(_BATCH):
      if temperature == 0:
        want = logits[b].argmax(-1)
      else:
        want = np.asarray(jax.random.categorical(keys[b], log_probs[b]))
      here = want_commit[b]
      np.testing.assert_array_equal(out.tokens[b][here], want[here])
      np.testing.assert_array_equal(out.tokens[b][~here], tokens[b][~here])
      np.testing.assert_array_equal(out.steps[b][here], 1)
      np.testing.assert_array_equal(out.steps[b][~here], steps[b][~here])
      np.testing.assert_allclose(
          out.logp[b][here], log_probs[b, here, want[here]], atol=1e-6
      )
      self.assertNotIn(_MASK, np.asarray(out.tokens[b])[here])

  def test_a_rows_step_does_not_depend_on_its_batch_mates(self):
    logits, tokens, steps, logp, eligible = _block(1)
    keys = step_lib.step_keys(
        rng.keys(jnp.arange(_BATCH, dtype=jnp.uint32)),
        jnp.array([3, 0, 2]),
        jnp.int32(1),
    )
    params = _params(temperature=0.9)
    whole = _step(logits, tokens, steps, logp, eligible, params, keys, 1)
    for b in range(_BATCH):
      alone = _step(
          *(x[b : b + 1] for x in (logits, tokens, steps, logp, eligible)),
          params,
          keys[b : b + 1],
          1,
      )
      for got, want in zip(alone, whole):
        np.testing.assert_array_equal(got[0], want[b])

  def test_commit_params_are_traced(self):
    logits, tokens, steps, logp, eligible = _block(2)
    keys = rng.keys(jnp.arange(_BATCH, dtype=jnp.uint32))
    step = jax.jit(step_lib.denoise_step)
    step(logits, tokens, steps, logp, eligible, _params(), keys, 0)
    compiled = step._cache_size()
    commits = set()
    for rule in commit_rules.RULES:
      for threshold in (0.2, 0.9):
        params = _params(rule, 0.5, threshold)
        out = step(logits, tokens, steps, logp, eligible, params, keys, 0)
        commits.add(np.asarray(out.commit).tobytes())
    self.assertGreater(len(commits), 2)
    # No compile for any other rule or threshold.
    self.assertEqual(step._cache_size(), compiled)


class CommitParamsTest(absltest.TestCase):

  def test_parameters_are_traced_in_their_type(self):
    params = step_lib.CommitParams.create(
        commit_rules.CommitSettings(rule="top_k", top_k=3), 0
    )
    self.assertEqual(params.rule, commit_rules.RULES.index("top_k"))
    self.assertEqual(set(params.parameters), set(commit_rules.PARAMETERS))
    self.assertEqual(params.parameters["top_k"].dtype, np.int32)
    self.assertEqual(params.parameters["top_k"], 3)
    self.assertEqual(params.parameters["threshold"].dtype, np.float32)
    self.assertAlmostEqual(float(params.parameters["threshold"]), 0.9)


if __name__ == "__main__":
  absltest.main()
