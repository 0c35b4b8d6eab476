# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipes: each reads its config and calls the library (`tunix run`)."""
