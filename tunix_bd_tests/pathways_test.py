# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Pathways launch: `pathwaysutils` initialised once, before JAX, and only then.

Runs the real `tunix` command in a subprocess with a stand-in
`pathwaysutils` package first on the path. The stand-in logs when it is
imported and when `initialize()` runs, and whether JAX was loaded by then; a
probe plugin's recipe logs when it runs, after importing JAX. Also runs
`launchers/pathways.sh --dry_run` on the real tunix_bd plugin.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

from absl.testing import absltest

_REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
_FILES = {
    "pathwaysutils/__init__.py": textwrap.dedent("""\
        import os
        import sys

        def _log(line):
          with open(os.environ["PATHWAYS_TEST_LOG"], "a") as f:
            f.write(line + "\\n")

        _log("pathwaysutils imported")

        def initialize():
          _log(f"initialize, jax loaded: {'jax' in sys.modules}")
        """),
    "probeplug-0.1.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: probeplug\nVersion: 0.1\n"
    ),
    "probeplug-0.1.dist-info/entry_points.txt": (
        "[tunix.plugins]\nprobeplug = probeplug_mod:PLUGIN\n"
    ),
    "probeplug_mod.py": textwrap.dedent("""\
        import pathlib
        from tunix_bd.cli import plugin_api

        PLUGIN = plugin_api.Plugin(
            name="probeplug",
            version="0.1",
            config_dir=pathlib.Path(__file__).parent / "probeplug_configs",
            recipes={"probe": "probeplug_recipe:probe"},
        )
        """),
    "probeplug_recipe.py": textwrap.dedent("""\
        import os
        import jax

        def probe(config):
          with open(os.environ["PATHWAYS_TEST_LOG"], "a") as f:
            f.write(f"recipe ran, workdir {config.workdir}\\n")
        """),
    "probeplug_configs/probe.py": textwrap.dedent("""\
        import ml_collections

        def get_config():
          return ml_collections.ConfigDict(
              dict(recipe="probe", workdir="runs/probe")
          )
        """),
}


class PathwaysTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.site = pathlib.Path(self.create_tempdir().full_path)
    for name, text in _FILES.items():
      (self.site / name).parent.mkdir(parents=True, exist_ok=True)
      (self.site / name).write_text(text)
    self.log = self.site / "log.txt"

  def _env(self, **extra) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAX_PLATFORMS", "JAX_BACKEND_TARGET")
        and not k.startswith("ENABLE_PATHWAYS")
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(self.site), str(_REPO_ROOT)]),
        PATH=os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]]),
        PATHWAYS_TEST_LOG=str(self.log),
        **extra,
    )
    return env

  def _run(self, argv, **env) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=self._env(**env),
        cwd=self.site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

  def _logged(self) -> list[str]:
    return self.log.read_text().splitlines() if self.log.exists() else []

  def test_initialize_once_before_the_recipe_imports_jax(self):
    tunix = [sys.executable, "-m", "tunix_bd", "run", "--plugin", "probeplug"]
    url = "--config.workdir=gs://bucket/run"
    result = self._run(tunix + ["probe", url], JAX_PLATFORMS="proxy")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(
        self._logged(),
        [
            "pathwaysutils imported",
            "initialize, jax loaded: False",
            "recipe ran, workdir gs://bucket/run",
        ],
    )

  def test_cpu_never_imports_pathwaysutils(self):
    tunix = [sys.executable, "-m", "tunix_bd", "run", "--plugin", "probeplug"]
    result = self._run(tunix + ["probe"], JAX_PLATFORMS="cpu")
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self._logged(), ["recipe ran, workdir runs/probe"])

  def test_launcher_dry_run_prints_environment_and_config(self):
    launcher = str(_REPO_ROOT / "launchers" / "pathways.sh")
    argv = [launcher, "sft", "--config.workdir=gs://bucket/run", "--dry_run"]
    result = self._run(argv)
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(
        result.stdout.splitlines()[:4],
        [
            "environment:",
            "  JAX_PLATFORMS=proxy",
            "  JAX_BACKEND_TARGET=grpc://127.0.0.1:29000",
            "  ENABLE_PATHWAYS_PERSISTENCE=1",
        ],
    )
    self.assertIn("  workdir = 'gs://bucket/run'\n", result.stdout)
    self.assertIn("  recipe = 'sft'\n", result.stdout)
    self.assertEqual(self._logged(), [])  # A dry run connects to nothing.
    preset = self._run(argv, JAX_BACKEND_TARGET="grpc://proxy:1234")
    self.assertIn("  JAX_BACKEND_TARGET=grpc://proxy:1234\n", preset.stdout)


if __name__ == "__main__":
  absltest.main()
