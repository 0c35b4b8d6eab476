# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Run bookkeeping shared by every recipe: the workdir and when it is written.

Sits above `models/` and `training/`, below `recipes/`: recipes call it; the
library packages never do.
"""
