# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The benchmarks as a `tunix` plugin of their own (`python -m benchmarks`)."""

import pathlib

import ml_collections
import tunix_bd
from tunix_bd import config_files
from tunix_bd.cli import plugin_api

_RECIPES = ("bench_decode", "bench_sft", "bench_rl", "bench_opd")

PLUGIN = plugin_api.Plugin(
    name="benchmarks",
    version=tunix_bd.__version__,
    description="tunix_bd's benchmarks: decoding, SFT and GRPO steps, OPD.",
    config_dir=pathlib.Path(__file__).parent / "configs",
    # As tunix_bd's own recipes: set before JAX starts.
    process_setup="tunix_bd.run.host_memory:prepare_process",
    recipes={name: f"benchmarks.recipes.{name}:run" for name in _RECIPES},
    validators={
        name: "benchmarks.recipes:check_values"
        for name in ("bench_sft", "bench_rl", "bench_opd")
    },
)


def get_config(name: str, arg: str | None = None) -> ml_collections.ConfigDict:
  """`get_config(arg)` of the benchmark config `name` (e.g. "bench_decode")."""
  module = config_files.import_file(PLUGIN.config_dir / f"{name}.py")
  return module.get_config() if arg is None else module.get_config(arg)
