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
