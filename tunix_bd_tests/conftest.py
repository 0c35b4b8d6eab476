# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Lets absltest suites run under pytest.

absltest parses flags in `absltest.main()`, which pytest never calls; without
this, `self.create_tempdir()` and other flag readers fail.

Each pytest run also gets its own absltest temporary root: absltest's default
(`/tmp/absl_testing`) outlives the run and is shared by every checkout on a
machine, so a test that resumes from a workdir could meet another run's
checkpoints there. The same holds for each pytest-xdist worker.
"""

import atexit
import os
import shutil
import tempfile

from absl import flags

os.environ.setdefault("WANDB_MODE", "disabled")
# pytest-xdist workers inherit the controller's environment: each gets a
# root of its own, or two workers could meet in one fixed-name directory.
if "TEST_TMPDIR" not in os.environ or "PYTEST_XDIST_WORKER" in os.environ:
  os.environ["TEST_TMPDIR"] = tempfile.mkdtemp(prefix="tunix_bd_tests_")
  atexit.register(shutil.rmtree, os.environ["TEST_TMPDIR"], True)
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
