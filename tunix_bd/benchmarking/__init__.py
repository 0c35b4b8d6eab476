# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Measuring decoding: speeds, roofline, step phases and the AR comparison.

The benchmark recipes (`bench_decode`, `bench_rl`, `compare`, the
quickstart's report) measure with these modules; `tunix_bd.evaluation`
holds the held-out evaluation that training recipes run.
"""
