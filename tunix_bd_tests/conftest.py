# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Lets absltest suites run under pytest.

absltest parses flags in `absltest.main()`, which pytest never calls; without
this, `self.create_tempdir()` and other flag readers fail.
"""

import os

from absl import flags

os.environ.setdefault("WANDB_MODE", "disabled")
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
