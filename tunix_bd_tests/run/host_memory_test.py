# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests of `tunix_bd.run.host_memory`: freed host buffers leave the process.

The pattern of a CPU train step: after one large buffer has been freed (which
raises glibc's default mmap threshold), medium buffers are allocated between
small ones that stay alive, then freed. With the threshold fixed they are
returned to the system; with glibc's default they stay resident.
"""

import importlib
import os
import subprocess
import sys
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd import plugin
from tunix_bd.run import host_memory

_MIB = 1 << 20
_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


# The pattern, run in a fresh interpreter: what a process has allocated and
# freed before (other tests in the same worker) moves glibc's threshold.
_PATTERN = """
import sys
import numpy as np
from tunix_bd.run import host_memory

def resident():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * 4096

if sys.argv[1] == "fixed" and not host_memory.return_freed_buffers():
  raise SystemExit("mallopt refused")
big = np.ones(16 << 20, np.uint8)  # Freeing a mapped 16 MiB block lifts
del big  # glibc's default threshold to it.
buffers, pins = [], []
for _ in range(64):
  buffers.append(np.ones(4 << 20, np.uint8))  # Pages touched.
  pins.append(np.ones(1024, np.uint8))  # Keeps each hole off the top.
held = resident()
del buffers
print(held - resident())
"""


def _released_bytes(mode: str) -> int:
  """Bytes the pattern returns to the system, `fixed` or glibc's `default`."""
  out = subprocess.run(
      [sys.executable, "-c", _PATTERN, mode],
      check=True,
      capture_output=True,
      text=True,
      env={**os.environ, "PYTHONPATH": _ROOT},
  )
  return int(out.stdout.split()[-1])


@absltest.skipIf(not sys.platform.startswith("linux"), "glibc's mallopt")
class ReturnFreedBuffersTest(absltest.TestCase):

  def test_freed_buffers_leave_the_process(self):
    self.assertGreater(_released_bytes("fixed"), 200 * _MIB)

  def test_without_it_they_stay_resident(self):
    # What the fix is for: glibc's moving threshold keeps them.
    self.assertLess(_released_bytes("default"), 32 * _MIB)


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


class PrepareProcessTest(parameterized.TestCase):

  def test_the_tunix_host_calls_it_for_every_recipe(self):
    module, _, function = plugin.PLUGIN.process_setup.partition(":")
    self.assertIs(
        getattr(importlib.import_module(module), function),
        host_memory.prepare_process,
    )

  @parameterized.named_parameters(
      ("cpu", "cpu", True),
      ("cpu_first", "cpu,cuda", True),
      ("pathways", "proxy", False),
      ("gpu", "cuda", False),
  )
  def test_the_scheduler_always_the_allocator_on_cpu(self, platforms, cpu):
    flag = "--xla_cpu_enable_concurrency_optimized_scheduler"
    with (
        mock.patch.dict(
            os.environ, {"XLA_FLAGS": "", "JAX_PLATFORMS": platforms}
        ),
        # The allocator setting is process-wide: not in a suite worker.
        mock.patch.object(host_memory, "return_freed_buffers") as returned,
    ):
      self.assertEqual(host_memory.computes_on_cpu(), cpu)
      host_memory.prepare_process()
      self.assertEqual(os.environ["XLA_FLAGS"], f"{flag}=false")
    self.assertEqual(returned.call_count, int(cpu))

  def test_without_jax_platforms_an_installed_accelerator_decides(self):
    def installed(libtpu=False, plugins=()):
      return (
          mock.patch.object(
              host_memory.importlib.util,
              "find_spec",
              side_effect=lambda name: object()
              if libtpu and name == "libtpu"
              else None,
          ),
          mock.patch.object(
              host_memory.importlib.metadata,
              "entry_points",
              return_value=list(plugins),
          ),
      )

    with mock.patch.dict(os.environ):
      os.environ.pop("JAX_PLATFORMS", None)
      for patches, cpu in (
          (installed(), True),
          (installed(libtpu=True), False),
          (installed(plugins=["xla_cuda12"]), False),
      ):
        with patches[0], patches[1]:
          self.assertEqual(host_memory.computes_on_cpu(), cpu)


if __name__ == "__main__":
  absltest.main()
