# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Masked-diffusion SFT: corruption, batching and the PeftTrainer loss hook."""
