# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`python -m benchmarks CONFIG[:ARG] ...` is `tunix run --plugin benchmarks`.

The `benchmarks` plugin is not installed, so the host is handed it here;
run from the repository's root, where `benchmarks` imports.
"""

import sys

from benchmarks import plugin
from tunix_bd.cli import main

if __name__ == "__main__":
  sys.argv[1:1] = ["run", "--plugin", plugin.PLUGIN.name]
  main.run(plugin.PLUGIN)
