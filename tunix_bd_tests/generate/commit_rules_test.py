# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.generate.commit_rules against NumPy references."""

import dataclasses
import inspect

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.generate import commit_rules


def _order(confidence, eligible):
  """Eligible indices by descending confidence, ties by lower index."""
  idx = [i for i in range(len(confidence)) if eligible[i]]
  return sorted(idx, key=lambda i: (-confidence[i], i))


def _reference(rule, confidence, eligible, threshold, top_k, factor):
  """A brute-force commit mask for `[batch, block]` NumPy inputs."""
  out = np.zeros(confidence.shape, bool)
  for row, (conf, elig) in enumerate(zip(confidence, eligible)):
    order = _order(conf, elig)
    if not order:
      continue
    if rule == commit_rules.THRESHOLD:
      chosen = [i for i in order if conf[i] >= np.float32(threshold)]
      chosen = chosen or order[:1]
    elif rule == commit_rules.TOP_K:
      chosen = order[:top_k]
    else:
      count = 0
      for n, i in enumerate(order, start=1):
        bar = np.float32(1.0) - np.float32(factor) / np.float32(n + 1)
        if conf[i] < bar:
          break
        count = n
      chosen = order[: max(count, 1)]
    out[row, chosen] = True
  return out


_traced_commit_mask = jax.jit(
    commit_rules.commit_mask, static_argnames=("rule",)
)


def _random_inputs(seed, batch=64, block=7):
  rng = np.random.default_rng(seed)
  # Coarse levels make ties common; some rows have nothing eligible.
  levels = rng.integers(0, 9, (batch, block)) / 8.0
  fine = rng.random((batch, block))
  confidence = np.where(rng.random((batch, 1)) < 0.5, levels, fine)
  eligible = rng.random((batch, block)) < rng.random((batch, 1))
  eligible[0] = False
  eligible[1] = True
  return confidence.astype(np.float32), eligible


class CommitRulesTest(parameterized.TestCase):

  @parameterized.product(
      rule=commit_rules.RULES,
      params=(
          dict(threshold=0.5, top_k=1, factor=1.0),
          dict(threshold=1.0, top_k=3, factor=0.3),
          dict(threshold=0.125, top_k=7, factor=2.5),
          dict(threshold=0.9, top_k=2, factor=1.0),
      ),
  )
  def test_equals_numpy_reference(self, rule, params):
    for seed in range(3):
      confidence, eligible = _random_inputs(seed)
      got = commit_rules.commit_mask(rule, confidence, eligible, **params)
      want = _reference(rule, confidence, eligible, **params)
      np.testing.assert_array_equal(np.asarray(got), want)
      # Traced parameters (as in the compiled decoder) agree too.
      traced = _traced_commit_mask(
          rule,
          confidence,
          eligible,
          threshold=jnp.float32(params["threshold"]),
          top_k=jnp.int32(params["top_k"]),
          factor=jnp.float32(params["factor"]),
      )
      np.testing.assert_array_equal(np.asarray(traced), want)

  @parameterized.parameters((rule,) for rule in commit_rules.RULES)
  def test_forced_progress_and_only_eligible(self, rule):
    confidence, eligible = _random_inputs(7)
    got = np.asarray(
        commit_rules.commit_mask(
            rule, confidence, eligible, threshold=1.0, top_k=1, factor=1e-3
        )
    )
    self.assertFalse((got & ~eligible).any())
    np.testing.assert_array_equal(got.any(axis=1), eligible.any(axis=1))

  def test_ties_go_to_the_lower_position(self):
    confidence = np.full((1, 5), 0.25, np.float32)
    eligible = np.array([[False, True, True, True, True]])
    for rule in commit_rules.RULES:
      got = commit_rules.commit_mask(
          rule, confidence, eligible, threshold=0.9, top_k=2, factor=0.1
      )
      want = [[False, True, rule == commit_rules.TOP_K, False, False]]
      np.testing.assert_array_equal(np.asarray(got), want, err_msg=rule)

  def test_factor_rule_stops_at_the_first_failure(self):
    # Bars for n = 1, 2, 3, 4 with f = 1: 0.5, 0.667, 0.75, 0.8.
    confidence = np.array([[0.7, 0.9, 0.6, 0.95]], np.float32)
    eligible = np.ones((1, 4), bool)
    got = commit_rules.factor_commit(confidence, eligible, 1.0)
    # Sorted: 0.95, 0.9, 0.7 (< 0.75 fails), so two commits.
    np.testing.assert_array_equal(np.asarray(got), [[False, True, False, True]])

  def test_confidence_ranks(self):
    confidence = np.array([[0.5, 0.9, 0.5, 0.1]], np.float32)
    eligible = np.array([[True, False, True, True]])
    ranks = commit_rules.confidence_ranks(confidence, eligible)
    np.testing.assert_array_equal(np.asarray(ranks), [[0, 3, 1, 2]])

  def test_unknown_rule(self):
    with self.assertRaisesRegex(ValueError, "rule must be one of"):
      commit_rules.commit_mask(
          "top_p",
          np.zeros((1, 2)),
          np.ones((1, 2), bool),
          threshold=0.5,
          top_k=1,
          factor=1.0,
      )


class CommitSettingsTest(parameterized.TestCase):

  def test_every_parameter_is_a_field_and_a_keyword_of_commit_mask(self):
    fields = {f.name for f in dataclasses.fields(commit_rules.CommitSettings)}
    self.assertEqual(fields, {"rule", *commit_rules.PARAMETERS})
    keywords = inspect.signature(commit_rules.commit_mask).parameters
    defaults = commit_rules.CommitSettings()
    for name in commit_rules.PARAMETERS:  # With the settings' default.
      self.assertEqual(keywords[name].default, getattr(defaults, name))

  @parameterized.parameters(
      ("rule", "top_p", r"rule must be one of \('threshold'"),
      ("threshold", 0.0, r"threshold must be a number in \(0, 1\], got 0.0"),
      ("top_k", 1.5, r"top_k must be an int >= 1, got 1.5"),
      ("top_k", True, r"top_k must be an int >= 1, got True"),
      ("factor", float("nan"), r"factor must be a number > 0, got nan"),
  )
  def test_a_bad_value_names_its_field(self, name, value, message):
    with self.assertRaisesRegex(ValueError, "^" + message):
      commit_rules.CommitSettings(**{name: value})

  def test_labels_and_sweeps_name_what_each_rule_decodes(self):
    for settings, label, words, thresholds in (
        (commit_rules.CommitSettings(), "0.9", "threshold 0.9", [0.5, 1.0]),
        (
            commit_rules.CommitSettings(rule="top_k", top_k=2),
            "top_k=2",
            "top_k=2",
            [0.9],
        ),
        (
            commit_rules.CommitSettings(rule="factor", factor=0.5),
            "factor=0.5",
            "factor=0.5",
            [0.9],
        ),
    ):
      self.assertEqual(settings.label(), label)
      self.assertEqual(commit_rules.describe(label), words)
      swept = settings.sweep((0.5, 1))
      self.assertEqual([s.threshold for s in swept], thresholds)
      self.assertEqual({s.rule for s in swept}, {settings.rule})

  def test_values_take_their_parameters_type(self):
    settings = commit_rules.CommitSettings(top_k=np.int64(3), threshold=1)
    self.assertIs(type(settings.top_k), int)
    self.assertIs(type(settings.threshold), float)
    again = commit_rules.CommitSettings(top_k=3, threshold=1.0)
    self.assertEqual(settings, again)


if __name__ == "__main__":
  absltest.main()
