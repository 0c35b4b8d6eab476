# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Training with Tunix's `PeftTrainer`: options, metrics, progress, AR."""
