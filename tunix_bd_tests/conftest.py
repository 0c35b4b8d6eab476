# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Lets absltest suites run under pytest.

absltest parses flags in `absltest.main()`, which pytest never calls; without
this, `self.create_tempdir()` and other flag readers fail.

Each pytest run also gets its own absltest temporary root: absltest's default
(`/tmp/absl_testing`) outlives the run and is shared by every checkout on a
machine, so a test that resumes from a workdir could meet another run's
checkpoints there. The same holds for each pytest-xdist worker.

Each pytest run also shares one persistent XLA compilation cache among its
workers and the CLI subprocesses its tests launch: most of the suite's time
is compiling tiny programs, and many are compiled again and again (each
resumed or relaunched run, each Tunix trainer's fresh jitted step, each
worker and subprocess). A cache hit is the program XLA would compile, keyed
by its HLO and options, so nothing tested changes; the cache starts empty
and is removed with the run, so no run sees another's programs.

The same processes compile with XLA's CPU code generation set for compile
time rather than run time (`_FAST_COMPILE_FLAGS`; a flag `XLA_FLAGS` already
names is kept): the suite's programs are tiny, so LLVM's optimisations cost
far more than they save (the suite runs in about 60 % of the time). The
programs, their HLO and the sharding passes are unchanged; the tests hold
semantics (equalities within one process, tolerances against outside
oracles), not one code generator's rounding.
"""

import atexit
import os
import shutil
import tempfile

from absl import flags
import pytest
from tunix_bd.run import host_memory  # Starts no JAX backend.

os.environ.setdefault("WANDB_MODE", "disabled")
# pytest-xdist workers inherit the controller's environment: each gets a
# root of its own, or two workers could meet in one fixed-name directory.
if "TEST_TMPDIR" not in os.environ or "PYTEST_XDIST_WORKER" in os.environ:
  os.environ["TEST_TMPDIR"] = tempfile.mkdtemp(prefix="tunix_bd_tests_")
  atexit.register(shutil.rmtree, os.environ["TEST_TMPDIR"], True)
# Set before JAX is imported (JAX reads these at import); the controller's
# directory, inherited by the workers and by every subprocess.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(
      prefix="tunix_bd_xla_cache_"
  )
  atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], True)
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
_FAST_COMPILE_FLAGS = (
    ("--xla_backend_optimization_level", "0"),
    ("--xla_llvm_disable_expensive_passes", "true"),
    ("--xla_cpu_use_fusion_emitters", "false"),
)
for _name, _value in _FAST_COMPILE_FLAGS:
  host_memory.add_xla_flag(_name, _value)
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()


# Test tiers: markers registered in pyproject.toml (`--strict-markers`),
# given here by node id so the suites stay plain absltest. The README's test
# command runs the default tier, `-m "not slow"`; CI runs every tier.
# `slow`: end-to-end runs (recipes, benchmarks, the 8-device subprocess),
# each class over about 15 s on 2 cores; `subprocess`: tests that start
# Python interpreters; `benchmarks`: tests of the repository's benchmarks.
_TIERS = {
    "slow": (
        "multi_device_test.py",
        "pathways_test.py",
        "benchmarks/bench_rl_test.py::SmokeTest",
        "benchmarks/fixed_schedule_test.py::RandomWorkloadTest",
        "core/external_logits_test.py::DecodeAndReplayTest",
        "core/replay_test.py::BfloatReplayTest",
        "core/replay_test.py::ChunkedReplayTest",
        "core/rng_test.py::DecodeTest",
        "core/rng_test.py::InitTest",
        "models/bd_formats_test.py::RecipeTest",
        "recipes/ar_pretrain_test.py::ArPretrainTest",
        "recipes/grpo_test.py::GrpoRecipeTest",
        "recipes/opd_test.py::OpdRecipeTest",
        "recipes/quickstart_test.py::QuickstartTest",
        "recipes/quickstart_test.py::RealisticTwinTest",
        "recipes/sft_test.py::SftRecipeTest",
        "rl/learner_test.py::EndToEndTest",
        "rl/learner_test.py::ResumeTest",
        "rl/rollout_test.py::SharedWeightsTest",
        "rl/rollout_test.py::TraceTest",
    ),
    "subprocess": (
        "multi_device_test.py",
        "pathways_test.py",
        "api_test.py::ApiTest::test_importing_it_loads_no_rl_code",
        "cli/cli_test.py::CliTest::test_subprocess_",
        "cli/cli_test.py::CliTest::test_the_console_script_",
        "models/checkpoint_digest_test.py::ExportDigestTest::test_command_line",
        "models/checkpoint_digest_test.py::ExportDigestTest::test_needs_no",
        "recipes/quickstart_test.py::QuickstartTest::test_readme_",
        "run/host_memory_test.py::ReturnFreedBuffersTest",
        "sft/tunix_diffusion_test.py::ReadmeTest",
    ),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
  """Marks each test with its tiers, before `-m` selects by them."""
  for item in items:
    node = item.nodeid.removeprefix("tunix_bd_tests/")
    if node.startswith("benchmarks/"):
      item.add_marker("benchmarks")
    for marker, prefixes in _TIERS.items():
      if node.startswith(prefixes):
        item.add_marker(marker)


# Tunix's `MetricsLogger` registers each backend's `log_scalar` with
# jax.monitoring and never unregisters it. A test's trainer left open keeps
# a TensorBoard writer whose thread dies with the test's temporary
# directory; any later `record_scalar` in the process (Orbax's, at every
# checkpoint save) then blocks on that writer's full queue. So listeners
# registered by a test's body go when the test ends, and those of its
# class's setup (`setUpClass`, `setUp`) when the class ends.
# Imported here, after the environment above, which JAX reads at import.
import jax.monitoring  # pylint: disable=g-import-not-at-top,g-bad-import-order

_LISTENERS = []  # Registered in setup phases, until their class ends.
_register_scalar_listener = jax.monitoring.register_scalar_listener


def _remembered(listener):
  _LISTENERS.append(listener)
  _register_scalar_listener(listener)


jax.monitoring.register_scalar_listener = _remembered


def _unregister(listeners):
  while listeners:
    try:
      jax.monitoring.unregister_scalar_listener(listeners.pop())
    except (AssertionError, ValueError):  # A test unregistered it itself.
      pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  """The listeners the test's body registers go when it returns."""
  del item
  start = len(_LISTENERS)
  yield
  body = _LISTENERS[start:]
  del _LISTENERS[start:]
  _unregister(body)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
  """At a class's (or module's) last test, its setup's listeners go."""
  if nextitem is not None and getattr(nextitem, "cls", None) is getattr(
      item, "cls", None
  ):
    return
  _unregister(_LISTENERS)
