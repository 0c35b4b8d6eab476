# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""docs/architecture.md against the code: the floors, the table, no cycle.

The import graph is read from the source (every `import` statement, also
those inside functions and under `TYPE_CHECKING`), so the document cannot
drift from the code without this test failing.
"""

import ast
import pathlib
import re

from absl.testing import absltest

_ROOT = pathlib.Path(__file__).resolve().parents[1]
_PACKAGE = _ROOT / "tunix_bd"
_DOC = _ROOT / "docs" / "architecture.md"


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(_ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports() -> dict[str, set[str]]:
  """`tunix_bd` module -> the `tunix_bd` modules it imports."""
  modules = {_module_name(p): p for p in _PACKAGE.rglob("*.py")}
  graph = {}
  for name, path in modules.items():
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        # `from a import b` imports module a.b when it exists, else a.
        names = [f"{node.module}.{a.name}" for a in node.names]
        targets = [n for n in names if n in modules] or [node.module]
      else:
        continue
      found |= {t for t in targets if t in modules and t != name}
    graph[name] = found
  return graph


def _unit(module: str) -> str:
  """The document's unit of a module: `pkg/` or a root module's name."""
  parts = module.split(".")
  if len(parts) == 1:
    return "__init__"
  if (_PACKAGE / parts[1]).is_dir():
    return parts[1] + "/"
  return parts[1]


def _unit_imports() -> dict[str, set[str]]:
  units: dict[str, set[str]] = {}
  for module, imported in _module_imports().items():
    own = _unit(module)
    units.setdefault(own, set())
    units[own] |= {_unit(m) for m in imported} - {own}
  return units


def _floors(units: dict[str, set[str]]) -> dict[str, int]:
  floors: dict[str, int] = {}

  def floor(unit, seen=()):
    if unit in seen:
      raise AssertionError(f"package cycle through {unit}: {seen}")
    if unit not in floors:
      below = [floor(u, (*seen, unit)) for u in units[unit]]
      floors[unit] = 1 + max(below) if below else 0
    return floors[unit]

  for unit in units:
    floor(unit)
  return floors


class ArchitectureTest(absltest.TestCase):

  def test_the_library_never_imports_the_benchmarks(self):
    # `benchmarks/` is the repository's, not the installed distribution's.
    for path in sorted(_PACKAGE.rglob("*.py")):
      for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
          names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
          names = [node.module or ""]
        else:
          continue
        for name in names:
          with self.subTest(module=str(path.relative_to(_ROOT)), name=name):
            self.assertNotIn(name.split(".")[0], ("benchmarks", "tools"))

  def test_no_module_imports_itself_through_others(self):
    graph = _module_imports()
    state = {}

    def visit(module, path):
      state[module] = "open"
      for other in sorted(graph[module]):
        if state.get(other) == "open":
          cycle = path[path.index(other) :] + [other]
          self.fail(f"import cycle: {' -> '.join(cycle)}")
        if other not in state:
          visit(other, path + [other])
      state[module] = "done"

    for module in sorted(graph):
      if module not in state:
        visit(module, [module])

  def test_the_floors_are_the_documented_ones(self):
    documented = {}
    for line in _DOC.read_text().splitlines():
      match = re.match(r"\s*floor (\d+)\s+(.*)", line)
      if match:
        for unit in match.group(2).split():
          documented[unit] = int(match.group(1))
    self.assertEqual(_floors(_unit_imports()), documented)

  def test_the_table_lists_what_each_package_imports(self):
    units = _unit_imports()
    rows = re.findall(r"^\| (`.+?) \| (.+?) \|$", _DOC.read_text(), re.M)
    checked = set()
    for names, imports in rows:
      if imports == "anything":
        continue
      listed = {
          n if n in units else n + "/"
          for n in re.findall(r"`([\w_]+)/?`", imports)
      }
      for unit in re.findall(r"`([\w_]+/?)`", names):
        with self.subTest(unit=unit):
          self.assertIn(unit, units)
          self.assertEqual(units[unit], listed, unit)
          checked.add(unit)
    self.assertEqual(checked, set(units) - {"recipes/"})


if __name__ == "__main__":
  absltest.main()
