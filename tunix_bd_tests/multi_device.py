# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs a test module on several fake CPU devices.

JAX fixes the device count when it starts. A multi-device test module calls
`request(n)` before it imports JAX, so that run alone it gets `n` CPU
devices; under a pytest session that started JAX earlier it has fewer, and
`rerun_in_subprocess` runs the whole module again in a fresh interpreter.
Import this module before JAX: it imports nothing that starts JAX.
"""

import os
import subprocess
import sys

from absl.testing import absltest

_CHILD_MARKER = "TUNIX_BD_MULTI_DEVICE_CHILD"


def _flags(num_devices: int) -> str:
  # Unoptimised LLVM codegen compiles ~3x faster; sharding semantics (the
  # SPMD partitioner works on HLO) are unchanged.
  return (
      f"--xla_force_host_platform_device_count={num_devices}"
      " --xla_backend_optimization_level=0"
  )


def request(num_devices: int) -> None:
  """Asks for `num_devices` CPU devices; call before importing JAX."""
  os.environ["XLA_FLAGS"] = " ".join(
      [os.environ.get("XLA_FLAGS", ""), _flags(num_devices)]
  ).strip()


def rerun_in_subprocess(
    test: absltest.TestCase, module_file: str, num_devices: int
) -> None:
  """Runs `module_file`'s tests on `num_devices` devices; fails `test` if any fail."""
  if os.environ.get(_CHILD_MARKER):
    test.fail(f"the subprocess did not get {num_devices} devices.")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(
      os.environ,
      **{_CHILD_MARKER: "1"},
      XLA_FLAGS=_flags(num_devices),
      JAX_PLATFORMS="cpu",
      PYTHONPATH=os.pathsep.join(
          [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]
      ),
  )
  result = subprocess.run(
      [sys.executable, os.path.abspath(module_file)],
      env=env,
      capture_output=True,
      text=True,
      timeout=900,
      check=False,
  )
  test.assertEqual(
      result.returncode, 0, result.stdout[-4000:] + result.stderr[-8000:]
  )
  test.assertIn("OK", result.stderr)
