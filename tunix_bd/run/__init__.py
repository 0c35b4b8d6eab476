# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Run bookkeeping every recipe shares: its config, workdir and models."""
