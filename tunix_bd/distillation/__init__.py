# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""On-policy distillation: a Tunix distillation strategy on student rollouts."""
