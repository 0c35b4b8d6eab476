# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What the benchmark recipes measure: decoding, SFT and RL steps, OPD.

The benchmark recipes (`bench_decode`, `bench_sft`, `bench_rl`,
`bench_opd`, `compare`, the quickstart's report) measure with these
modules: decoding speeds, the roofline and the AR comparison; the SFT
step's variants (`sft_step`); the GRPO step's arms (`grpo_step`), timed
phase by phase (`step_phases`); OPD vs continued SFT at equal wall time
(`equal_time`). `tunix_bd.evaluation` holds the held-out evaluation that
training recipes run.
"""
