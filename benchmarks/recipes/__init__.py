# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark recipes: each reads its config and measures (`python -m benchmarks`)."""

import importlib

from tunix_bd.run import stage as stage_lib


def check_values(config) -> None:
  """`--dry_run`'s check, as `tunix_bd.recipes.check_values`."""
  recipe = importlib.import_module(f"benchmarks.recipes.{config.recipe}")
  with stage_lib.values_only():
    recipe.validate(config)
