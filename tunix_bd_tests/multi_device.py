# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs the multi-device test modules on fake CPU devices, in one subprocess.

JAX fixes the device count when it starts. A multi-device test module run
alone (`python FILE`) calls `request(n)` before it imports JAX, to get `n`
CPU devices. Under pytest it asks for nothing (that would change the device
count of every test in the session, were JAX not started yet): its
`DeviceTestCase`s skip, and `multi_device_test.py` runs every module in
`MODULES` in one fresh interpreter with `NUM_DEVICES` devices, one start of
Python, JAX and Tunix for all of them. Import this module before JAX: it
imports nothing that starts JAX.

    if __name__ == "__main__":
      multi_device.request(8)
    ...
    class MeshTest(multi_device.DeviceTestCase):  # Runs in the subprocess.
      NUM_DEVICES = 8
"""

import os
import re
import subprocess
import sys

from absl.testing import absltest

_CHILD_MARKER = "TUNIX_BD_MULTI_DEVICE_CHILD"
# The modules of `DeviceTestCase`s, relative to the repository root.
MODULES = (
    "tunix_bd_tests/rl/meshes_test.py",
    "tunix_bd_tests/rl/role_meshes_test.py",
    "tunix_bd_tests/rl/role_shim_test.py",
    "tunix_bd_tests/sft/mesh_test.py",
)
# The most any module asks for.
NUM_DEVICES = 8


def _xla_flags_with_devices(num_devices: int) -> str:
  """This process's `XLA_FLAGS` plus `num_devices` CPU devices."""
  return " ".join([
      os.environ.get("XLA_FLAGS", ""),
      f"--xla_force_host_platform_device_count={num_devices}",
  ]).strip()


def request(num_devices: int) -> None:
  """Asks for `num_devices` CPU devices; call before JAX starts a backend."""
  os.environ["XLA_FLAGS"] = _xla_flags_with_devices(num_devices)


def device_test_classes(path: str) -> list[str]:
  """The names of the `DeviceTestCase`s the test module `path` defines."""
  with open(path) as f:
    return re.findall(
        r"^class (\w+)\(multi_device\.DeviceTestCase", f.read(), re.M
    )


def run_modules(test: absltest.TestCase) -> None:
  """Runs the `DeviceTestCase`s of `MODULES` on `NUM_DEVICES` devices.

  Fails if any test fails or skips there: each must run. The modules' other
  tests need no devices and run in the parent pytest, not again here.
  """
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  node_ids = []
  for module in MODULES:
    path = os.path.join(root, module)
    node_ids += [f"{path}::{name}" for name in device_test_classes(path)]
  env = {
      k: v
      for k, v in os.environ.items()
      if not k.startswith(("PYTEST_", "TUNIX_BD_MULTI_DEVICE"))
  }
  env.update({
      _CHILD_MARKER: "1",
      # The suite's compile-time flags (conftest.py) and the devices.
      "XLA_FLAGS": _xla_flags_with_devices(NUM_DEVICES),
      "JAX_PLATFORMS": "cpu",
      "PYTHONPATH": os.pathsep.join(
          [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]
      ),
  })
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-n0"] + node_ids,
      env=env,
      cwd=root,
      capture_output=True,
      text=True,
      timeout=900,
      check=False,
  )
  output = result.stdout[-8000:] + result.stderr[-4000:]
  test.assertEqual(result.returncode, 0, output)
  summary = result.stdout.strip().splitlines()[-1]
  test.assertRegex(summary, r"\d+ passed", output)
  test.assertNotRegex(summary, r"skipped|deselected", output)


class DeviceTestCase(absltest.TestCase):
  """Skipped unless the process has `NUM_DEVICES` devices (the subprocess)."""

  NUM_DEVICES = 8

  def setUp(self):
    super().setUp()
    import jax  # pylint: disable=g-import-not-at-top

    if jax.device_count() < self.NUM_DEVICES:
      if os.environ.get(_CHILD_MARKER):
        self.fail(f"the subprocess did not get {self.NUM_DEVICES} devices.")
      self.skipTest(f"runs in the {self.NUM_DEVICES}-device subprocess.")
