# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The block-diffusion contract every stage shares.

Masks, settings, target-aligned logits (cache-free and cached), the trace of
a rollout, its step canvases and replay. Imports nothing from decoding
loops, SFT, RL, distillation or recipes.
"""
