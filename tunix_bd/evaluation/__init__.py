# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Evaluation: the AR reference (Tunix's Sampler), speed, and reports.

Accuracy and speed of AR and block-diffusion decoding measured the same way,
side by side, and written as tables, JSON and plots.
"""
