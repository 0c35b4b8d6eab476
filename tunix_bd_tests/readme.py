# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""README.md's Python snippets, extracted for the tests that run them.

recipes/quickstart_test.py runs "Decoding from Python" after its quickstart;
sft/tunix_diffusion_test.py runs "With Tunix's own diffusion API". Each
snippet runs unchanged, so the README can never drift from the API.
"""

import pathlib
import re

_README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_snippet(section: str) -> str:
  """The first ```python block after the `## {section}` heading."""
  text = _README.read_text(encoding="utf-8")
  start = text.index(f"\n## {section}\n")
  match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
  if match is None:
    raise ValueError(f"no python block under '## {section}'.")
  return match.group(1)
