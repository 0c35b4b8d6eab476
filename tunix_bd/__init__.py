# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd: block-diffusion post-training for JAX, as a Tunix plugin."""

import logging as _logging

__version__ = "0.1.0.dev0"


# transformers' "PyTorch was not found" notice, printed on every import, reads
# like an error without being one: tunix_bd uses transformers for tokenizers
# and configs only (models are Tunix's, in JAX). It is logged on the library's
# root logger when transformers is first imported, always after this package;
# every other transformers message passes.
_logging.getLogger("transformers").addFilter(
    lambda record: not record.getMessage().startswith("PyTorch was not found")
)
