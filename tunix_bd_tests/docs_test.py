# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The docs live in the repository, and what they cite exists.

* Every invariant of docs/design.md ("Invariants", "RL invariants", "OPD
  invariants") names at least one test, and every test it names
  (`tunix_bd_tests/<file>.py::<Class>::<test>`) exists: the file, the class,
  and the method on the class or a base class it inherits from a test
  module. Every test the docs name is written from the repository root, so
  none escapes that check.
* What the code and tests cite of docs/design.md exists: each quoted
  section is a heading there, each invariant number an invariant.
* No file in the repository points at documents a clone does not have.
* Every relative link (and `#anchor`) in README.md and docs/*.md resolves.
"""

import ast
import functools
import os
import pathlib
import re

from absl.testing import absltest

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_DESIGN = _ROOT / "docs" / "design.md"
_TEST_REF = re.compile(r"`(tunix_bd_tests/[\w/]+\.py)::(\w+)::(\w+)`")
_INVARIANT_SECTIONS = ("Invariants", "RL invariants", "OPD invariants")
# Built from pieces so that this file does not match itself.
_FORBIDDEN = ("../" + "shared", "DESIGN" + ".md", "rl_opd" + "_design")
_SKIPPED_DIRS = {"__pycache__", "build", "dist", "node_modules"}
# Checkpoints and other run outputs are not sources.
_MAX_BYTES = 1 << 20


def _markdown_text(path: pathlib.Path) -> str:
  """The file without its fenced code blocks (links there are code)."""
  text = path.read_text(encoding="utf-8")
  return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _sections(text: str) -> dict[str, str]:
  """`{heading: body}` for every `#`-heading of a markdown text."""
  parts = re.split(r"^(#{1,6}) +(.+?) *$", text, flags=re.M)
  return {parts[i + 1]: parts[i + 2] for i in range(1, len(parts), 3)}


def _numbered_items(body: str) -> dict[int, str]:
  """`{n: text}` of a section's top-level numbered list."""
  items = re.split(r"^(\d+)\. ", body, flags=re.M)
  return {int(items[i]): items[i + 1] for i in range(1, len(items), 2)}


def _slug(heading: str) -> str:
  """GitHub's anchor for a heading."""
  heading = re.sub(r"[`*]", "", heading.strip().lower())
  heading = re.sub(r"[^\w\- ]", "", heading)
  return heading.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def _classes(relative: str) -> dict[str, ast.ClassDef]:
  tree = ast.parse((_ROOT / relative).read_text(encoding="utf-8"))
  return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _has_method(relative: str, class_name: str, method: str) -> bool:
  """Whether the class defines or inherits (from a test module) `method`."""
  if not (_ROOT / relative).is_file():
    return False
  node = _classes(relative).get(class_name)
  if node is None:
    return False
  for item in node.body:
    if isinstance(item, ast.FunctionDef) and item.name == method:
      return True
  for base in node.bases:
    if isinstance(base, ast.Name) and base.id in _classes(relative):
      if _has_method(relative, base.id, method):
        return True
    elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
      folder = pathlib.PurePosixPath(relative).parent
      module = (folder / f"{base.value.id}.py").as_posix()
      if not (_ROOT / module).is_file():
        module = f"tunix_bd_tests/{base.value.id}.py"
      if (_ROOT / module).is_file() and _has_method(module, base.attr, method):
        return True
  return False


def _repository_files():
  """The repository's files, without VCS data, caches, venvs and big files."""
  for directory, subdirs, files in os.walk(_ROOT):
    subdirs[:] = [
        d
        for d in subdirs
        if not d.startswith(".")
        and d not in _SKIPPED_DIRS
        and not d.endswith(".egg-info")
        and not os.path.exists(os.path.join(directory, d, "pyvenv.cfg"))
    ]
    for name in files:
      path = pathlib.Path(directory) / name
      if path.is_file() and path.stat().st_size <= _MAX_BYTES:
        yield path


class DesignTest(absltest.TestCase):

  def test_every_invariant_names_tests_that_exist(self):
    sections = _sections(_DESIGN.read_text(encoding="utf-8"))
    for title in _INVARIANT_SECTIONS:
      items = _numbered_items(sections[title])
      self.assertNotEmpty(items, title)
      for number, text in items.items():
        refs = _TEST_REF.findall(text)
        self.assertNotEmpty(refs, f"{title} {number} names no test")
        for path, class_name, method in refs:
          with self.subTest(item=f"{title} {number}", test=method):
            self.assertTrue((_ROOT / path).is_file(), path)
            self.assertTrue(
                _has_method(path, class_name, method),
                f"{path}::{class_name}::{method} does not exist",
            )

  def test_every_named_test_exists(self):
    refs = _TEST_REF.findall(_DESIGN.read_text(encoding="utf-8"))
    self.assertNotEmpty(refs)
    for path, class_name, method in refs:
      with self.subTest(test=method):
        self.assertTrue(
            _has_method(path, class_name, method),
            f"{path}::{class_name}::{method} does not exist",
        )

  def test_every_test_reference_is_a_node_id_from_the_root(self):
    # A shortened one (`x_test.py::Class::test`) escapes the checks above.
    for page in [_ROOT / "README.md", *sorted((_ROOT / "docs").glob("*.md"))]:
      text = page.read_text(encoding="utf-8")
      for ref in re.findall(r"`([\w/.]*_test\.py::\w+::\w+)`", text):
        with self.subTest(page=page.name, ref=ref):
          self.assertTrue(ref.startswith("tunix_bd_tests/"), ref)

  def test_invariant_numbers_are_consecutive(self):
    sections = _sections(_DESIGN.read_text(encoding="utf-8"))
    invariants = list(_numbered_items(sections["Invariants"]))
    self.assertEqual(invariants, [*range(1, 14)])
    rl = list(_numbered_items(sections["RL invariants"]))
    opd = list(_numbered_items(sections["OPD invariants"]))
    # The OPD items continue the RL numbering, as the tests cite them.
    self.assertEqual(rl + opd, [*range(1, len(rl) + len(opd) + 1)])

  def test_code_cites_sections_and_invariants_that_exist(self):
    sections = _sections(_DESIGN.read_text(encoding="utf-8"))
    headings = set(sections)
    invariants = set(_numbered_items(sections["Invariants"]))
    cited = 0
    for path in _repository_files():
      if path.suffix != ".py" or path.name == "docs_test.py":
        continue
      text = " ".join(path.read_text(encoding="utf-8").split())
      for section in re.findall(r'docs/design\.md "([^"]+)"', text):
        cited += 1
        self.assertIn(section, headings, f"{path}: no section {section!r}")
      for number in re.findall(r"docs/design\.md invariants? (\d+)", text):
        cited += 1
        self.assertIn(int(number), invariants, f"{path}: invariant {number}")
    self.assertGreater(cited, 0)


class RepositoryTest(absltest.TestCase):

  def test_no_file_points_outside_the_repository(self):
    for path in _repository_files():
      try:
        text = path.read_text(encoding="utf-8")
      except (UnicodeDecodeError, OSError):
        continue  # Binary files cite nothing.
      for forbidden in _FORBIDDEN:
        self.assertFalse(
            forbidden in text, f"{path.relative_to(_ROOT)} cites {forbidden}"
        )

  def test_license_is_apache_2(self):
    text = (_ROOT / "LICENSE").read_text(encoding="utf-8")
    self.assertIn(
        "Apache License\n                           Version 2.0", text
    )
    self.assertIn("END OF TERMS AND CONDITIONS", text)

  def test_relative_markdown_links_resolve(self):
    pages = [_ROOT / "README.md", *sorted((_ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
      text = _markdown_text(page)
      targets = re.findall(r"\]\(([^)\s]+)\)", text)
      targets += re.findall(r"^\[[^\]]+\]:\s*(\S+)", text, flags=re.M)
      for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
          continue  # https:, mailto:, ...
        checked += 1
        where, _, anchor = target.partition("#")
        linked = (page.parent / where).resolve() if where else page
        with self.subTest(page=page.name, target=target):
          self.assertTrue(linked.exists(), f"{page.name}: {target}")
          if anchor and linked.suffix == ".md":
            slugs = {_slug(h) for h in _sections(_markdown_text(linked))}
            self.assertIn(anchor, slugs, f"{page.name}: {target}")
    self.assertGreater(checked, 0)


if __name__ == "__main__":
  absltest.main()
