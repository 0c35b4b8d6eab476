# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs a test module on several fake CPU devices.

JAX fixes the device count when it starts. A multi-device test module calls
`request(n)` before it imports JAX, so that run alone it gets `n` CPU
devices; under a pytest session that started JAX earlier it has fewer, and
`rerun_in_subprocess` runs the whole module again in a fresh interpreter.
Import this module before JAX: it imports nothing that starts JAX.

    multi_device.request(8)
    ...
    SubprocessTest = multi_device.subprocess_test(__file__, 8)

    class MeshTest(multi_device.DeviceTestCase):  # Runs in the subprocess.
      NUM_DEVICES = 8
"""

import os
import subprocess
import sys

from absl.testing import absltest

_CHILD_MARKER = "TUNIX_BD_MULTI_DEVICE_CHILD"


def request(num_devices: int) -> None:
  """Asks for `num_devices` CPU devices; call before JAX starts a backend."""
  os.environ["XLA_FLAGS"] = " ".join([
      os.environ.get("XLA_FLAGS", ""),
      f"--xla_force_host_platform_device_count={num_devices}",
  ]).strip()


def rerun_in_subprocess(
    test: absltest.TestCase, module_file: str, num_devices: int
) -> None:
  """Runs `module_file`'s tests on `num_devices` devices; fails if any fails."""
  if os.environ.get(_CHILD_MARKER):
    test.fail(f"the subprocess did not get {num_devices} devices.")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(
      os.environ,
      **{_CHILD_MARKER: "1"},
      # Unoptimised LLVM codegen compiles ~3x faster; sharding semantics
      # (the SPMD partitioner works on HLO) are unchanged.
      XLA_FLAGS=(
          f"--xla_force_host_platform_device_count={num_devices}"
          " --xla_backend_optimization_level=0"
      ),
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


def subprocess_test(
    module_file: str, num_devices: int
) -> type[absltest.TestCase]:
  """A test that reruns `module_file` when this process has too few devices."""

  class SubprocessTest(absltest.TestCase):

    def test_on_enough_devices(self):
      import jax  # pylint: disable=g-import-not-at-top

      if jax.device_count() < num_devices:
        rerun_in_subprocess(self, module_file, num_devices)

  return SubprocessTest


class DeviceTestCase(absltest.TestCase):
  """Skipped unless the process has `NUM_DEVICES` devices (the subprocess)."""

  NUM_DEVICES = 8

  def setUp(self):
    super().setUp()
    import jax  # pylint: disable=g-import-not-at-top

    if jax.device_count() < self.NUM_DEVICES:
      self.skipTest(f"runs in the {self.NUM_DEVICES}-device subprocess.")
