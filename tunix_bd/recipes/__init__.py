# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipes: each reads its config and calls the library (`tunix run`)."""

import importlib

from tunix_bd.run import stage as stage_lib


def check_values(config) -> None:
  """`tunix run --dry_run`'s check: the recipe's `validate` within
  `stage.values_only` (a recipe's own checks past its sections, GRPO's KL
  reference, still read the checkpoints they compare)."""
  recipe = importlib.import_module(f"tunix_bd.recipes.{config.recipe}")
  with stage_lib.values_only():
    recipe.validate(config)
