# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`python -m tunix_bd ARGS` runs the `tunix` command: `tunix ARGS`."""

from tunix_bd.cli import main

if __name__ == "__main__":
  main.run()
