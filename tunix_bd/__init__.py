# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd: block-diffusion post-training for JAX, as a Tunix plugin."""

import logging as _logging

__version__ = "0.1.0.dev0"


class _NoTorchNotice(_logging.Filter):
  """Drops transformers' "PyTorch was not found" notice.

  tunix_bd uses transformers for tokenizers and configs only (models are
  Tunix's, in JAX), so the notice, printed on every import, reads like an
  error without being one. Every other transformers message passes.
  """

  def filter(self, record: _logging.LogRecord) -> bool:
    return not record.getMessage().startswith("PyTorch was not found")


# The notice is logged on the library's root logger when transformers is
# first imported, which in tunix_bd is always after this package.
_logging.getLogger("transformers").addFilter(_NoTorchNotice())
