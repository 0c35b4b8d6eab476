# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The error the `tunix` host raises for mistakes made on the command line."""


class UsageError(ValueError):
  """A mistake by the person launching `tunix`, reported in one line.

  Raised for an unknown plugin, a config that cannot be found, an unknown or
  mistyped override, a value that does not parse, or a missing recipe. The
  host prints `tunix: error: <message>` and exits with status 2, without a
  traceback.
  """
