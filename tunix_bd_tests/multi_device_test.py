# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs the multi-device test modules (`multi_device.MODULES`) in one
subprocess with `multi_device.NUM_DEVICES` fake CPU devices."""

import glob
import os

from absl.testing import absltest
from tunix_bd_tests import multi_device

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class MultiDeviceTest(absltest.TestCase):

  def test_modules_are_those_with_device_tests(self):
    found = set()
    for path in glob.glob(
        os.path.join(_ROOT, "tunix_bd_tests", "**", "*_test.py"),
        recursive=True,
    ):
      if multi_device.device_test_classes(path):
        found.add(os.path.relpath(path, _ROOT))
    self.assertEqual(found, set(multi_device.MODULES))

  def test_every_module_passes_on_its_devices(self):
    multi_device.run_modules(self)


if __name__ == "__main__":
  absltest.main()
