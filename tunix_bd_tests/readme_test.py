# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""README.md's "Decoding from Python" snippet runs as written.

A tiny quickstart writes `runs/quickstart` in a temporary directory, as the
README's main job does; the snippet, extracted from README.md, then runs
there unchanged, so the README can never drift from the API.
"""

import ast
import os
import pathlib
import re
import subprocess
import sys

from absl.testing import absltest

_README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_snippet(section: str) -> str:
  """The first ```python block after the `## {section}` heading."""
  text = _README.read_text(encoding="utf-8")
  start = text.index(f"\n## {section}\n")
  match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
  if match is None:
    raise ValueError(f"no python block under '## {section}'.")
  return match.group(1)


class ReadmeTest(absltest.TestCase):

  def test_decoding_from_python_runs_verbatim_after_a_quickstart(self):
    cwd = self.create_tempdir().full_path
    env = dict(os.environ, JAX_PLATFORMS="cpu")

    def run(*args):
      return subprocess.run(
          [sys.executable, *args],
          cwd=cwd,
          env=env,
          capture_output=True,
          text=True,
          timeout=900,
      )

    quickstart = run(
        "-m", "tunix_bd", "run", "--plugin", "tunix_bd", "quickstart.py:tiny"
    )
    self.assertEqual(quickstart.returncode, 0, quickstart.stderr[-3000:])
    self.assertTrue(os.path.isdir(os.path.join(cwd, "runs/quickstart")))
    snippet = run("-c", python_snippet("Decoding from Python"))
    self.assertEqual(snippet.returncode, 0, snippet.stderr[-3000:])
    # Three prints: the completions of two strings, the completion of one
    # BatchEncoding, then the token-level API's completion of that same
    # prompt with its tokens per forward.
    printed = snippet.stdout.strip().splitlines()
    self.assertLen(printed, 3)
    strings, encoded = map(ast.literal_eval, printed[:2])
    self.assertLen(strings, 2)
    self.assertLen(encoded, 1)
    for completion in (*strings, *encoded):
      self.assertIsInstance(completion, str)
    token_level = re.fullmatch(r"(.*) \[([0-9.]+)\]", printed[2])
    self.assertIsNotNone(token_level, printed[2])
    # Tokens per forward (0 for the tiny model's empty answers).
    self.assertGreaterEqual(float(token_level.group(2)), 0.0)
    # Text in and token ids in decode the same prompt greedily at the same
    # threshold: the same completion.
    self.assertEqual(token_level.group(1), encoded[0])
    # No "PyTorch was not found" notice (transformers is imported).
    self.assertNotIn("PyTorch", snippet.stderr)


if __name__ == "__main__":
  absltest.main()
