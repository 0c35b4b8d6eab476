# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The error the `tunix` host raises for command-line mistakes, and its hint."""

from collections.abc import Iterable
import difflib


class UsageError(ValueError):
  """A mistake by the person launching `tunix`, reported in one line.

  The host prints `tunix: error: <message>` and exits with status 2, without a
  traceback.
  """


def did_you_mean(word: str, choices: Iterable[str], prefix: str = "") -> str:
  """`"; did you mean 'PREFIXc'?"` for the choice c nearest `word`, or "."."""
  close = difflib.get_close_matches(word, list(choices), n=1)
  return f"; did you mean {prefix + close[0]!r}?" if close else "."
