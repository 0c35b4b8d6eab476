# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd: block-diffusion post-training for JAX, as a Tunix plugin."""

__version__ = "0.1.0.dev0"
