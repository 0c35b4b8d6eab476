# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe configs shipped with tunix_bd (installed as `tunix_bd.configs`)."""
