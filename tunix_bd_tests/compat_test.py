# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.compat: the one module that knows Tunix's versions.

Three promises: only compat imports Tunix's RL, SFT, distillation (and
other non-model) internals; every private Tunix name tunix_bd reaches is in
`compat.PRIVATE_SURFACE`, its owner's source pinned per supported version
(the GRPO learner's ported method among them); and compat reads both
versions' loss outputs and GRPO fields alike.
"""

import ast
import dataclasses
import hashlib
import inspect
import pathlib
import re

from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
import numpy as np
import tunix
from tunix.models.qwen2 import params as qwen2_params
from tunix.rl import rl_learner
from tunix.sft import peft_trainer
from tunix.sft import progress_bar
from tunix_bd import compat
from tunix_bd.rl import learner as learner_lib
from tunix_bd_tests import test_common

_PACKAGE = pathlib.Path(compat.__file__).resolve().parent
# Tunix's model code (architectures, checkpoint params) is imported where
# needed; everything else of Tunix's goes through compat.
_ALLOWED_PREFIX = "tunix.models"
# The Tunix class or function each `compat.PRIVATE_SURFACE` key names.
# pylint: disable=protected-access
_SURFACE_OWNERS = {
    "PeftTrainer": compat.PeftTrainer,
    "RLLearner": rl_learner.RLLearner,
    "RLCluster": compat.RLCluster,
    "BaseStrategy": compat.BaseStrategy,
    "GRPOLearner._generate_and_compute_advantage": (
        compat.GRPOLearner._generate_and_compute_advantage
    ),
    "peft_trainer._default_loss_fn": peft_trainer._default_loss_fn,
    "progress_bar._is_in_ipython": progress_bar._is_in_ipython,
    "qwen2_params._get_key_and_transform_mapping": (
        qwen2_params._get_key_and_transform_mapping
    ),
}
# pylint: enable=protected-access


def _tunix_imports(path: pathlib.Path) -> list[str]:
  """The `tunix...` modules a source file imports, as `line: module`."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:
      names = [node.module or ""]
      names += [f"{node.module}.{alias.name}" for alias in node.names]
    else:
      continue
    for name in names:
      if name == "tunix" or name.startswith("tunix."):
        if not name.startswith(_ALLOWED_PREFIX):
          found.append(f"{node.lineno}: {name}")
          break
  return found


class ImportGraphTest(absltest.TestCase):

  def test_only_compat_imports_tunix_internals(self):
    offenders = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
      if path == _PACKAGE / "compat.py":
        continue
      found = _tunix_imports(path)
      if found:
        offenders[str(path.relative_to(_PACKAGE.parent))] = found
    self.assertEmpty(
        offenders,
        "import these Tunix names through tunix_bd.compat (a Tunix upgrade"
        " must be a change to compat alone)",
    )

  def test_the_check_sees_every_import_form(self):
    path = pathlib.Path(self.create_tempfile(content="""
import tunix.rl.rl_cluster
from tunix.sft import hooks
from tunix import distillation
from tunix.models.qwen3 import model
def f():
  from tunix.rl import reshard
""").full_path)
    self.assertEqual(
        _tunix_imports(path),
        [
            "2: tunix.rl.rl_cluster",
            "3: tunix.sft",
            "4: tunix",
            "7: tunix.rl",
        ],
    )


class OverrideDigestTest(absltest.TestCase):

  def test_the_private_tunix_surface_is_the_pinned_one(self):
    known = compat.PRIVATE_SURFACE_SHA256.get(compat.TUNIX_VERSION)
    self.assertIsNotNone(
        known,
        f"unsupported Tunix {compat.TUNIX_VERSION}: re-read every"
        " compat.PRIVATE_SURFACE owner, port what changed, then add its"
        " digests to compat.PRIVATE_SURFACE_SHA256.",
    )
    self.assertEqual(set(known), set(compat.PRIVATE_SURFACE))
    for owner, names in compat.PRIVATE_SURFACE.items():
      source = inspect.getsource(_SURFACE_OWNERS[owner])
      digest = hashlib.sha256(source.encode()).hexdigest()[:16]
      with self.subTest(owner=owner):
        self.assertEqual(
            known[owner],
            digest,
            f"Tunix's {owner} changed in {compat.TUNIX_VERSION}: re-read it"
            " (and tunix_bd's uses of its private names), port what"
            " changed, then set compat.PRIVATE_SURFACE_SHA256"
            f"[{compat.TUNIX_VERSION!r}][{owner!r}] = {digest!r}.",
        )
        for name in names:  # Defined by the owner itself, not a base.
          self.assertRegex(source, rf"def {name}\(|self\.{name}\s*[:=]")

  def test_no_module_reaches_a_private_tunix_name_outside_the_surface(self):
    # Every `x._name` in tunix_bd that is no name of tunix_bd's own, also
    # as a string (`getattr(x, "_name")`).
    own, reached = set(), {}
    for path in _PACKAGE.rglob("*.py"):
      for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
          own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(
            node.ctx, ast.Store
        ):
          own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
          own.add(node.id)
        elif isinstance(node, ast.alias):
          own.add(node.asname or node.name.split(".")[-1])
        name = None
        if isinstance(node, ast.Attribute):
          name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
        ):
          name = node.args[1].value
        if (
            isinstance(name, str)
            and name.startswith("_")
            and not name.startswith("__")
        ):
          reached.setdefault(name, path.name)
    # Of those, the names Tunix's source defines (not `os._exit`).
    tunix_source = "\n".join(
        p.read_text() for p in pathlib.Path(tunix.__file__).parent.rglob("*.py")
    )
    reached = {
        name: where
        for name, where in reached.items()
        if re.search(
            rf"def {name}\(|self\.{name}\s*[:=]|^{name}\s*=",
            tunix_source,
            re.M,
        )
    }
    pinned = {n for names in compat.PRIVATE_SURFACE.values() for n in names}
    pinned |= {key.split(".")[-1] for key in compat.PRIVATE_SURFACE}
    foreign = {
        name: where
        for name, where in reached.items()
        if name not in own and name not in pinned
    }
    self.assertEqual(foreign, {})

  def test_the_override_is_still_an_override(self):
    self.assertIn("_generate_and_compute_advantage", vars(compat.GRPOLearner))
    self.assertIn(
        "_generate_and_compute_advantage",
        vars(learner_lib.DiffusionGRPOLearner),
    )


class LossOutputTest(parameterized.TestCase):

  def test_a_tuple_passes_through(self):
    loss, aux = compat.loss_and_aux((jnp.float32(2.0), {"kl": 0.5}))
    self.assertEqual(float(loss), 2.0)
    self.assertEqual(aux, {"kl": 0.5})

  def test_a_bare_loss_has_no_aux(self):
    loss, aux = compat.loss_and_aux(jnp.float32(3.0))
    self.assertEqual(float(loss), 3.0)
    self.assertEqual(aux, {})

  @parameterized.parameters(
      "token-mean",
      "sequence-mean-token-mean",
      "sequence-mean-token-scale",
      "seq-mean-token-sum",
      "sequence-mean-token-sum-norm",
  )
  def test_aggregate_loss_is_a_finite_scalar(self, mode):
    mask = jnp.asarray([[1, 1, 0], [1, 0, 0]], jnp.float32)
    loss = compat.aggregate_loss(jnp.ones((2, 3)), mask, mode)
    self.assertEqual(loss.shape, ())
    self.assertTrue(bool(jnp.isfinite(loss)))
    reduced = compat.reduced_aggregate_loss(jnp.ones((2, 3)), mask, mode)
    self.assertEqual(jnp.shape(reduced), ())

  def test_token_mean_is_the_mean_over_the_mask(self):
    values = jnp.asarray([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]])
    mask = jnp.asarray([[1, 1, 0], [1, 0, 0]], jnp.float32)
    np.testing.assert_allclose(
        compat.aggregate_loss(values, mask, "token-mean"), 2.0, rtol=1e-6
    )

  def test_default_sft_loss_is_a_scalar(self):
    model = test_common.tiny_qwen3(vocab_size=32, seed=0)
    tokens = jnp.asarray([[1, 4, 5, 6]], jnp.int32)
    loss = compat.default_sft_loss(
        model,
        input_tokens=tokens,
        input_mask=jnp.ones_like(tokens, bool),
        positions=jnp.arange(4)[None],
        attention_mask=jnp.tril(jnp.ones((1, 4, 4), bool)),
    )
    self.assertEqual(jnp.shape(loss), ())
    self.assertTrue(bool(jnp.isfinite(loss)))


class GrpoConfigTest(absltest.TestCase):

  def test_old_logps_are_recomputed_on_every_version(self):
    config = compat.grpo_config(num_generations=2)
    use_rollout, sampler_is, _ = compat.grpo_old_logps_source(config)
    self.assertFalse(use_rollout)
    self.assertIsNone(sampler_is)

  def test_tunix_main_fields_fail_closed_on_0_1_7(self):
    names = {f.name for f in dataclasses.fields(compat.GRPOConfig)}
    if "sampler_is" in names:
      config = compat.grpo_config(num_generations=2, sampler_is="token")
      self.assertEqual(compat.grpo_old_logps_source(config)[1], "token")
    else:
      with self.assertRaisesRegex(ValueError, "grpo.sampler_is"):
        compat.grpo_config(num_generations=2, sampler_is="token")


class _Config:

  def __init__(self, **fields):
    self.__dict__.update(fields)


class OldLogpsAndWeightsTest(absltest.TestCase):
  """`learner.old_logps_and_weights` sources old log-probs as Tunix does."""

  def setUp(self):
    super().setUp()
    self.rollout = np.asarray([[-1.0, -2.0, 0.0]], np.float32)
    self.mask = np.asarray([[True, True, False]])
    self.anchor = np.asarray([[-0.5, -3.0, 0.0]], np.float32)

  def _call(self, needs_old, **fields):
    return learner_lib.old_logps_and_weights(
        self.rollout,
        self.mask,
        lambda: self.anchor,
        needs_old=needs_old,
        algo_config=_Config(**fields),
    )

  def test_on_policy_needs_nothing(self):
    self.assertEqual(self._call(False), (None, None))

  def test_recompute_is_the_anchor(self):
    old, weights = self._call(True, use_rollout_logps=False)
    np.testing.assert_array_equal(old, self.anchor)
    self.assertIsNone(weights)
    old, _ = self._call(True)  # 0.1.7: no field, recompute.
    np.testing.assert_array_equal(old, self.anchor)

  def test_rollout_logps_are_the_trace_s(self):
    old, weights = self._call(True, use_rollout_logps=True)
    np.testing.assert_array_equal(old, self.rollout)
    self.assertIsNone(weights)

  def test_token_sampler_is_weights_are_truncated_ratios(self):
    old, weights = self._call(
        False,
        use_rollout_logps=True,
        sampler_is="token",
        sampler_is_threshold=1.5,
    )
    np.testing.assert_array_equal(old, self.anchor)
    np.testing.assert_allclose(
        weights, [[min(np.exp(0.5), 1.5), np.exp(-1.0), 0.0]], rtol=1e-6
    )

  def test_the_anchor_is_replayed_only_when_needed_or_verified(self):
    calls = []

    def anchor_fn():
      calls.append(1)
      return self.anchor

    for needs_old, use_rollout, verify in (
        (False, False, False),
        (True, True, False),
    ):
      learner_lib.old_logps_and_weights(
          self.rollout,
          self.mask,
          anchor_fn,
          needs_old=needs_old,
          algo_config=_Config(use_rollout_logps=use_rollout),
          verify=verify,
      )
    self.assertEqual(calls, [])
    old, _ = learner_lib.old_logps_and_weights(
        self.rollout,
        self.mask,
        anchor_fn,
        needs_old=False,
        algo_config=_Config(),
        verify=True,
    )
    self.assertEqual((calls, old), ([1], None))


if __name__ == "__main__":
  absltest.main()
