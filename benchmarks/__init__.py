# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's benchmarks, outside the library: run from a clone.

    python -m benchmarks CONFIG[:ARG] [--config.KEY=VALUE ...] [--dry_run]

runs a benchmark recipe through the `tunix` host (`benchmarks.plugin`), as
`tunix run --plugin tunix_bd` runs the library's recipes. Nothing under
`tunix_bd/` imports this package (`architecture_test` checks), and it is not
installed with `tunix-bd`.

- `bench_decode`: decoding speed of our AR loop, Tunix's `Sampler` and
  block diffusion, beside each method's forward-cost roofline (`roofline`,
  `decode_table`, `batch_sweep`), on a fixed schedule (`fixed_schedule`), a
  trained workload (`trained_workload`) or a peer's own decoder (`peer`,
  `peer_driver`).
- `bench_sft`: the SFT step's variants (`sft_step`), beside `memory_plan`'s
  estimate.
- `bench_rl`: the GRPO step's arms, phase by phase (`grpo_step`,
  `step_phases`).
- `bench_opd`: OPD vs continued SFT at equal wall time (`equal_time`).
- `caesar`: the data of the worked example in `docs/recipes.md`.
"""
