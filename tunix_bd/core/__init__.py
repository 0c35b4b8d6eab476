# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion contract every stage shares (docs/architecture.md)."""
