# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.run.host_memory`: freed host buffers leave the process.

The pattern of a CPU train step: after one large buffer has been freed (which
raises glibc's default mmap threshold), medium buffers are allocated between
small ones that stay alive, then freed. With the threshold fixed they are
returned to the system; with glibc's default they stay resident.
"""

import os
import sys
from unittest import mock

from absl.testing import absltest
import numpy as np
from tunix_bd.run import host_memory

_MIB = 1 << 20


def _resident_bytes() -> int:
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * 4096


@absltest.skipIf(not sys.platform.startswith("linux"), "glibc's mallopt")
class ReturnFreedBuffersTest(absltest.TestCase):

  def test_freed_buffers_leave_the_process(self):
    self.assertTrue(host_memory.return_freed_buffers())
    # Freeing a mapped 16 MiB block lifts glibc's default threshold to it.
    big = np.ones(16 * _MIB, np.uint8)
    del big
    buffers, pins = [], []
    for _ in range(64):
      buffers.append(np.ones(4 * _MIB, np.uint8))  # Pages touched.
      pins.append(np.ones(1024, np.uint8))  # Keeps each hole off the top.
    held = _resident_bytes()
    del buffers
    released = held - _resident_bytes()
    self.assertGreater(released, 200 * _MIB)
    del pins


class ScheduleForMemoryTest(absltest.TestCase):

  def test_adds_the_flag_once_and_keeps_the_users(self):
    flag = "--xla_cpu_enable_concurrency_optimized_scheduler"
    with mock.patch.dict(os.environ, {"XLA_FLAGS": "--xla_dump_to=/x"}):
      self.assertTrue(host_memory.schedule_for_memory())
      self.assertEqual(
          os.environ["XLA_FLAGS"], f"--xla_dump_to=/x {flag}=false"
      )
      self.assertFalse(host_memory.schedule_for_memory())
    with mock.patch.dict(os.environ, {"XLA_FLAGS": f"{flag}=true"}):
      self.assertFalse(host_memory.schedule_for_memory())
      self.assertEqual(os.environ["XLA_FLAGS"], f"{flag}=true")


if __name__ == "__main__":
  absltest.main()
