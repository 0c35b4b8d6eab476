# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Reinforcement learning of block-diffusion policies through Tunix's RL."""
