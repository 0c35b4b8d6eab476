# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for the `tunix` host: plugin discovery, configs, overrides, errors.

Plugins are found through a fake installed distribution: a temporary
directory on the path holds `fakeplug-0.1.dist-info/entry_points.txt` and the
module it names, so discovery runs through `importlib.metadata` for real.
The fake recipe writes the config it received as JSON, so each test checks
exactly what a recipe would see. Tests run `main(argv)` in-process and
`python -m tunix_bd` in a subprocess.
"""

import contextlib
import importlib.metadata
import io
import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from tunix_bd.cli import config_loading
from tunix_bd.cli import main
from tunix_bd.cli import plugin_api

_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

_ENTRY_POINTS = {
    "fakeplug": textwrap.dedent("""\
        [tunix.plugins]
        fakeplug = fakeplug_mod:PLUGIN
        callableplug = fakeplug_mod:make_callable_plugin
        wrongtype = fakeplug_mod:NOT_A_PLUGIN
        """),
    "brokenplug": textwrap.dedent("""\
        [tunix.plugins]
        brokenplug = brokenplug_mod:PLUGIN
        """),
}

_FAKEPLUG_MOD = textwrap.dedent('''\
    """A fake tunix plugin whose recipe records the config it receives."""
    import json
    import pathlib

    import ml_collections

    from tunix_bd.cli import plugin_api

    _CONFIGS = pathlib.Path(__file__).parent / "fakeplug_configs"

    PLUGIN = plugin_api.Plugin(
        name="fakeplug",
        version="0.1",
        config_dir=_CONFIGS,
        recipes={
            "dump": "fakeplug_mod:dump",
            "reject": "fakeplug_mod:reject",
            "crash": "fakeplug_mod:crash",
            "ctrl_c": "fakeplug_mod:ctrl_c",
            "hbm": "fakeplug_mod:hbm",
            "compile": "fakeplug_mod:compile_one",
        },
        registers={"loss hooks": ["fake_loss"], "rollouts": ["fake_rollout"]},
        description="A fake plugin for the CLI tests.",
        validators={"dump": "fakeplug_mod:check_lr"},
        process_setup="fakeplug_mod:setup",
    )
    NOT_A_PLUGIN = {"name": "wrongtype"}


    def make_callable_plugin():
      return plugin_api.Plugin(
          name="callableplug",
          version="2.0",
          config_dir=str(_CONFIGS),
          recipes={"dump": "fakeplug_mod:dump"},
      )


    def _leaves(config, prefix=""):
      for key, value in config.items():
        if isinstance(value, ml_collections.ConfigDict):
          yield from _leaves(value, prefix + key + ".")
        else:
          yield prefix + key, value


    # What the host called, in order: "setup", then "pathways", "recipe".
    EVENTS = []


    def setup():
      EVENTS.append("setup")


    def dump(config):
      EVENTS.append("recipe")
      leaves = dict(_leaves(config))
      pathlib.Path(config.output).write_text(json.dumps({
          "values": leaves,
          "types": {k: type(v).__name__ for k, v in leaves.items()},
          "locked": config.is_locked,
      }))


    def check_lr(config):
      if config.lr < 0:
        raise ValueError(f"lr must be >= 0, got {config.lr}")


    def reject(config):
      raise ValueError(f"fake.lr must be below 1, got {config.lr}")


    def crash(config):
      raise RuntimeError("a real bug in the recipe")


    def ctrl_c(config):
      raise KeyboardInterrupt  # Ctrl-C.


    def compile_one(config):
      import jax
      jax.jit(lambda x: x * 2 + 1)(1.0).block_until_ready()
      pathlib.Path(config.output).write_text(json.dumps({
          "cache_dir": jax.config.jax_compilation_cache_dir,
          "enabled": jax.config.jax_enable_compilation_cache,
          "max_size": jax.config.jax_compilation_cache_max_size,
      }))


    def hbm(config):
      # What Tunix's trainers do on a CPU device, then another warning.
      from absl import logging
      import jax
      from tunix.sft import utils

      del config
      utils.show_hbm_usage("fake")
      logging.warning("another warning on %s", jax.devices()[0].platform)
    ''')

_FAKECONF = textwrap.dedent('''\
    """Fake config with a 'big' variant.

    Launch: tunix run --plugin fakeplug fakeconf[:big]
    """
    import ml_collections
    from ml_collections import config_dict


    def get_config(arg=None):
      if arg not in (None, "big"):
        raise ValueError(f"unknown variant {arg!r}; use 'big'")
      config = ml_collections.ConfigDict()
      config.recipe = "dump"
      config.source = __file__
      config.output = ""
      config.variant = arg or "base"
      config.seed = 0
      config.use_ema = False
      config.lr = 0.001
      config.name = "tiny"
      config.shape = (2, 3)
      config.layers = [1, 2]
      config.tasks = ("sort", "count")
      config.max_steps = config_dict.placeholder(int)
      config.extra = None
      config.optimizer = ml_collections.ConfigDict({"b1": 0.9, "warmup": 10})
      if arg == "big":
        config.width = 512
      return config
    ''')

_NO_RECIPE_CONF = textwrap.dedent('''\
    """Fake config that names no recipe."""
    import ml_collections


    def get_config():
      return ml_collections.ConfigDict({"output": ""})
    ''')

_FILES = {
    "fakeplug_mod.py": _FAKEPLUG_MOD,
    "fakeplug_configs/fakeconf.py": _FAKECONF,
    "fakeplug_configs/no_recipe.py": _NO_RECIPE_CONF,
    "fakeplug_configs/_private.py": '"""Not a config."""\n',
    "brokenplug_mod.py": 'raise ImportError("boom: a dependency is missing")\n',
}


def _write_site(site: pathlib.Path) -> None:
  """Writes the fake distributions and their modules into `site`."""
  for dist, entry_points in _ENTRY_POINTS.items():
    dist_info = site / f"{dist}-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n"
    )
    (dist_info / "entry_points.txt").write_text(entry_points)
  for name, text in _FILES.items():
    (site / name).parent.mkdir(parents=True, exist_ok=True)
    (site / name).write_text(text)


class CliTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls._site_dir = tempfile.TemporaryDirectory()
    cls.site = pathlib.Path(cls._site_dir.name).resolve()
    _write_site(cls.site)
    sys.path.insert(0, str(cls.site))

  @classmethod
  def tearDownClass(cls):
    sys.path.remove(str(cls.site))
    for module in ("fakeplug_mod", "brokenplug_mod"):
      sys.modules.pop(module, None)
    cls._site_dir.cleanup()
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    # Every run starts in an unrelated directory, as a user's would.
    # tempfile, not create_tempdir(): that needs absl flags parsed (pytest).
    self.cwd = pathlib.Path(
        self.enter_context(tempfile.TemporaryDirectory())
    ).resolve()
    self.enter_context(contextlib.chdir(self.cwd))
    self.output = self.cwd / "seen.json"
    self.enter_context(mock.patch.dict(os.environ))
    os.environ.pop("JAX_PLATFORMS", None)

  def _main(self, *argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
      status = main.main(list(argv))
    return status, stdout.getvalue(), stderr.getvalue()

  def _run(self, *argv: str, config: str = "fakeconf") -> tuple[int, str, str]:
    return self._main(
        "run",
        "--plugin",
        "fakeplug",
        config,
        f"--config.output={self.output}",
        *argv,
    )

  def _seen(self) -> dict[str, dict[str, object]]:
    return json.loads(self.output.read_text())

  def _subprocess(
      self, *argv: str, env: dict[str, str] | None = None
  ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) if env is None else env
    env.pop("JAX_PLATFORMS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO_ROOT), str(self.site)])
    return subprocess.run(
        [sys.executable, "-m", "tunix_bd", *argv],
        cwd=self.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

  def assertUsageError(self, result: tuple[int, str, str], regex: str):
    status, stdout, stderr = result
    self.assertEqual(status, 2, msg=stderr)
    self.assertEqual(stdout, "")
    self.assertLen(stderr.splitlines(), 1, msg=stderr)
    self.assertRegex(stderr, "^tunix: error: " + regex)
    self.assertFalse(self.output.exists(), msg="the recipe ran")

  # Discovery and `tunix plugins`.

  def test_discovery_reads_the_entry_point_group(self):
    found = plugin_api.discover_plugins()
    self.assertContainsSubset(
        ["brokenplug", "callableplug", "fakeplug", "wrongtype"], list(found)
    )
    self.assertEqual(found["fakeplug"].value, "fakeplug_mod:PLUGIN")
    self.assertEqual(found["fakeplug"].group, "tunix.plugins")

  def test_load_plugin_accepts_instance_and_callable(self):
    plugin = plugin_api.load_plugin("fakeplug")
    self.assertIsInstance(plugin, plugin_api.Plugin)
    self.assertEqual((plugin.name, plugin.version), ("fakeplug", "0.1"))
    made = plugin_api.load_plugin("callableplug")
    self.assertEqual((made.name, made.version), ("callableplug", "2.0"))
    self.assertIsInstance(made.config_dir, pathlib.Path)

  def test_load_plugin_rejects_non_plugin(self):
    with self.assertRaisesRegex(
        plugin_api.UsageError, r"gave a dict, expected a .*plugin_api\.Plugin"
    ):
      plugin_api.load_plugin("wrongtype")

  @parameterized.named_parameters(
      ("bad_recipe_target", {"recipes": {"x": "no_colon"}}, "package.module"),
      ("empty_function", {"recipes": {"x": "mod:"}}, "package.module"),
      ("registers_str", {"registers": {"hooks": "a"}}, "sequence of names"),
      ("recipes_list", {"recipes": ["x"]}, "recipes must be a mapping, got"),
      ("registers_list", {"registers": ["x"]}, "registers must be a mapping"),
      ("empty_version", {"version": ""}, "version"),
      ("bad_process_setup", {"process_setup": "mod.setup"}, "process_setup"),
  )
  def test_plugin_validates_its_fields(self, changes, regex):
    fields = dict(name="p", version="1", config_dir=self.cwd, recipes={})
    fields.update(changes)
    with self.assertRaisesRegex(ValueError, regex):
      plugin_api.Plugin(**fields)

  def test_plugins_command_lists_everything(self):
    status, stdout, _ = self._main("plugins")
    self.assertEqual(status, 0)
    fake = stdout[stdout.index("fakeplug 0.1") :]
    expected = [
        "fakeplug 0.1: A fake plugin for the CLI tests.",
        "    fakeconf   Fake config with a 'big' variant.",
        "    no_recipe  Fake config that names no recipe.",
        "  recipes:",
        "    crash    fakeplug_mod:crash",
        "    dump     fakeplug_mod:dump",
        "    reject   fakeplug_mod:reject",
        "  loss hooks: fake_loss",
        "  rollouts: fake_rollout",
    ]
    for line in expected:
      self.assertIn(line + "\n", fake)
    self.assertNotIn("_private", stdout)
    self.assertIn("callableplug 2.0\n", stdout)
    # A plugin that fails to load is listed with its error.
    self.assertIn(
        "brokenplug (failed to load brokenplug_mod:PLUGIN): ImportError:"
        " boom: a dependency is missing\n",
        stdout,
    )
    self.assertRegex(stdout, r"wrongtype \(failed to load .*\): UsageError")

  # Config resolution.

  @parameterized.named_parameters(
      ("plugin_name", "fakeconf", "plugin"),
      ("plugin_name_py", "fakeconf.py", "plugin"),
      ("relative_path", "mine/conf", "user"),
      ("relative_path_py", "mine/conf.py", "user"),
      ("absolute_path", "{cwd}/mine/conf", "user"),
  )
  def test_config_resolution(self, spec, owner):
    (self.cwd / "mine").mkdir()
    shutil.copy(self.site / "fakeplug_configs/fakeconf.py", self.cwd / "mine")
    (self.cwd / "mine/fakeconf.py").rename(self.cwd / "mine/conf.py")
    status, _, stderr = self._run(config=spec.format(cwd=self.cwd))
    self.assertEqual(status, 0, msg=stderr)
    expected = {
        "plugin": self.site / "fakeplug_configs/fakeconf.py",
        "user": self.cwd / "mine/conf.py",
    }[owner]
    self.assertEqual(self._seen()["values"]["source"], str(expected))
    self.assertIn(f"| config {expected.resolve()} |", stderr)

  def test_path_in_cwd_wins_over_plugin_config(self):
    shutil.copy(self.site / "fakeplug_configs/fakeconf.py", self.cwd)
    self.assertEqual(self._run()[0], 0)
    self.assertEqual(
        self._seen()["values"]["source"], str(self.cwd / "fakeconf.py")
    )

  def test_config_arg_selects_variant(self):
    self.assertEqual(self._run("--config.width=3", config="fakeconf:big")[0], 0)
    seen = self._seen()["values"]
    self.assertEqual((seen["variant"], seen["width"]), ("big", 3))
    self.assertTrue(self._seen()["locked"])
    # `width` exists only in the 'big' variant.
    self.output.unlink()
    self.assertUsageError(
        self._run("--config.width=3"), "unknown config key 'width'"
    )

  @parameterized.named_parameters(
      (
          "unknown_plugin",
          ["--plugin", "fakeplugg", "fakeconf"],
          r"unknown plugin 'fakeplugg'; did you mean 'fakeplug'\? Installed"
          r" plugins: brokenplug, callableplug, fakeplug, (tunix_bd,"
          r" )?wrongtype",
      ),
      (
          "wrong_plugin_type",
          ["--plugin", "wrongtype", "fakeconf"],
          "plugin 'wrongtype': entry point 'fakeplug_mod:NOT_A_PLUGIN' gave a",
      ),
      (
          "config_not_found",
          ["--plugin", "fakeplug", "fakecon"],
          r"config 'fakecon' not found: no file .*fakecon\.py', and plugin"
          r" 'fakeplug' has no config 'fakecon'; did you mean 'fakeconf'\? Its"
          r" configs: fakeconf, no_recipe$",
      ),
      (
          "unknown_variant",
          ["--plugin", "fakeplug", "fakeconf:huge"],
          "config fakeconf.py:huge: unknown variant 'huge'; use 'big'$",
      ),
      (
          "empty_arg",
          ["--plugin", "fakeplug", "fakeconf:"],
          "config 'fakeconf:' has an empty ARG",
      ),
      (
          "arg_not_taken",
          ["--plugin", "fakeplug", "no_recipe:x"],
          "config no_recipe.py:x takes no ARG$",
      ),
      (
          "unknown_key",
          ["--plugin", "fakeplug", "fakeconf", "--config.sed=1"],
          r"unknown config key 'sed'; did you mean 'seed'\? Valid keys at the"
          r" top level: extra, layers, lr, max_steps, name, optimizer, output,"
          r" recipe, seed, shape, source, tasks, use_ema,"
          r" variant$",
      ),
      (
          "unknown_nested_key",
          ["--plugin", "fakeplug", "fakeconf", "--config.optimizer.warmpu=1"],
          r"unknown config key 'optimizer.warmpu'; did you mean"
          r" 'optimizer.warmup'\? Valid keys under 'optimizer': b1, warmup$",
      ),
      (
          "unknown_key_without_suggestion",
          ["--plugin", "fakeplug", "fakeconf", "--config.optimizer.b2=1"],
          r"unknown config key 'optimizer.b2'\. Valid keys under 'optimizer':"
          r" b1, warmup$",
      ),
      (
          "section_as_leaf",
          ["--plugin", "fakeplug", "fakeconf", "--config.optimizer=1"],
          (
              "config key 'optimizer' is a section, not a value; set one of its"
              " keys instead: optimizer.b1, optimizer.warmup$"
          ),
      ),
      (
          "leaf_as_section",
          ["--plugin", "fakeplug", "fakeconf", "--config.seed.x=1"],
          "unknown config key 'seed.x': 'seed' holds a value of type int",
      ),
      (
          "int_rejects_float",
          ["--plugin", "fakeplug", "fakeconf", "--config.seed=1.5"],
          "invalid value for --config.seed: expected int, got '1.5'$",
      ),
      (
          "placeholder_int",
          ["--plugin", "fakeplug", "fakeconf", "--config.max_steps=ten"],
          "invalid value for --config.max_steps: expected int, got 'ten'$",
      ),
      (
          "bad_bool",
          ["--plugin", "fakeplug", "fakeconf", "--config.use_ema=2"],
          (
              r"invalid value for --config.use_ema: expected bool"
              r" \(true/false/1/0/yes/no\), got '2'"
          ),
      ),
      (
          "bad_float",
          ["--plugin", "fakeplug", "fakeconf", "--config.lr=fast"],
          "invalid value for --config.lr: expected float, got 'fast'$",
      ),
      (
          "bad_tuple",
          ["--plugin", "fakeplug", "fakeconf", "--config.shape=5"],
          r"invalid value for --config.shape: expected tuple literal such as"
          r" '\(1, 2\)', got '5'$",
      ),
      (
          "missing_value",
          ["--plugin", "fakeplug", "fakeconf", "--config.seed"],
          "--config.seed has no value",
      ),
      (
          "missing_recipe",
          ["--plugin", "fakeplug", "no_recipe"],
          (
              "the config has no 'recipe' key naming what to run; plugin"
              " 'fakeplug' provides recipes: compile, crash, ctrl_c, dump, hbm,"
              " reject$"
          ),
      ),
      (
          "unknown_recipe",
          ["--plugin", "fakeplug", "fakeconf", "--config.recipe=train"],
          (
              "unknown recipe 'train' in config.recipe; plugin 'fakeplug'"
              " provides recipes: compile, crash, ctrl_c, dump, hbm, reject$"
          ),
      ),
  )
  def test_usage_error(self, argv, regex):
    self.assertUsageError(
        self._main("run", f"--config.output={self.output}", *argv), regex
    )

  def test_config_not_found_with_no_configs(self):
    self.assertUsageError(
        self._main("run", "--plugin", "fakeplug", "/nonexistent/x"),
        "config '/nonexistent/x' not found: .*Its configs: fakeconf",
    )

  def test_a_config_with_a_syntax_error_is_one_line_naming_it(self):
    (self.cwd / "typo.py").write_text(
        "def get_config():\n  return dict(a=1,, b=2)\n"
    )
    self.assertUsageError(
        self._run(config="typo"),
        rf"config '{self.cwd}/typo\.py' line 2: invalid syntax.*:"
        r" 'return dict\(a=1,, b=2\)'$",
    )

  def test_non_configdict_config_is_rejected(self):
    (self.cwd / "plain.py").write_text("def get_config():\n  return {}\n")
    self.assertUsageError(
        self._run(config="plain"),
        "config plain.py: get_config.. returned a dict, expected an"
        " ml_collections.ConfigDict$",
    )

  def test_overrides_only_with_run(self):
    self.assertUsageError(
        self._main("plugins", "--config.seed=1"), "--config.. overrides apply"
    )

  # Typed overrides.

  @parameterized.named_parameters(
      ("bool_true", "use_ema", "TRUE", True, "bool"),
      ("bool_yes", "use_ema", "yes", True, "bool"),
      ("bool_one", "use_ema", "1", True, "bool"),
      ("bool_no", "use_ema", "No", False, "bool"),
      ("int", "seed", "7", 7, "int"),
      ("int_negative", "seed", "-3", -3, "int"),
      ("float", "lr", "0.5", 0.5, "float"),
      ("float_from_int", "lr", "2", 2.0, "float"),
      ("float_exponent", "lr", "1e-4", 1e-4, "float"),
      ("str", "name", "hello world", "hello world", "str"),
      ("str_of_digits", "name", "123", "123", "str"),
      ("tuple", "shape", "(4, 5)", [4, 5], "tuple"),
      ("tuple_from_list", "shape", "[6]", [6], "tuple"),
      ("list_from_tuple", "layers", "(3, 4)", [3, 4], "list"),
      ("words", "tasks", "reverse, add", ["reverse", "add"], "tuple"),
      ("one_word", "tasks", "count", ["count"], "tuple"),
      ("words_literal", "tasks", "('a',)", ["a"], "tuple"),
      ("placeholder_int", "max_steps", "100", 100, "int"),
      ("none_literal", "extra", "1.5", 1.5, "float"),
      ("none_list", "extra", "[1, 2]", [1, 2], "list"),
      ("none_fallback_str", "extra", "abc", "abc", "str"),
      ("nested_float", "optimizer.b1", "0.95", 0.95, "float"),
      ("nested_int", "optimizer.warmup", "3", 3, "int"),
  )
  def test_override_types(self, key, raw, expected, type_name):
    for form in ([f"--config.{key}={raw}"], [f"--config.{key}", raw]):
      self.output.unlink(missing_ok=True)
      status, _, stderr = self._run(*form)
      self.assertEqual(status, 0, msg=stderr)
      seen = self._seen()
      self.assertEqual(seen["values"][key], expected)
      self.assertEqual(seen["types"][key], type_name)

  def test_overrides_apply_in_order_and_are_logged(self):
    status, stdout, stderr = self._run(
        "--config.seed=1", "--config.seed", "2", "--config.name", "-x"
    )
    self.assertEqual(status, 0, msg=stderr)
    self.assertEqual(self._seen()["values"]["seed"], 2)
    self.assertEqual(self._seen()["values"]["name"], "-x")
    self.assertEqual(stdout, "")
    self.assertIn(
        "tunix: plugin fakeplug 0.1 | config"
        f" {self.site.resolve() / 'fakeplug_configs/fakeconf.py'} | recipe"
        f" dump | overrides: output={str(self.output)!r} seed=1 seed=2"
        " name='-x'\n",
        stderr,
    )

  def test_override_helpers(self):
    overrides, rest = config_loading.split_override_args(
        ["run", "--config.a.b=x=y", "c", "--config.d", "--e"]
    )
    self.assertEqual(rest, ["run", "c"])
    self.assertEqual(
        overrides,
        [
            config_loading.Override("a.b", "x=y"),
            config_loading.Override("d", "--e"),
        ],
    )
    _, _, stderr = self._main(
        "run", "--plugin", "fakeplug", "fakeconf", "--dry_run"
    )
    self.assertIn(" | overrides: none\n", stderr)

  # Running recipes.

  def test_dry_run_prints_config_and_does_not_run(self):
    status, stdout, _ = self._run("--config.seed=7", "--dry_run")
    self.assertEqual(status, 0)
    self.assertFalse(self.output.exists())
    self.assertIn("overrides:\n", stdout)
    self.assertIn("  seed = 7\n", stdout)
    self.assertIn("config:\n", stdout)
    self.assertIn("  optimizer.b1 = 0.9\n", stdout)
    self.assertIn("  shape = (2, 3)\n", stdout)
    self.assertIn("  max_steps = None\n", stdout)

  def test_dry_run_checks_values_with_the_plugins_validator(self):
    status, stdout, stderr = self._run("--config.lr=-1.0", "--dry_run")
    self.assertEqual(status, 1)
    self.assertIn("  lr = -1.0\n", stdout)
    self.assertEqual(
        stderr.splitlines()[-1], "tunix: error: lr must be >= 0, got -1.0"
    )
    self.assertFalse(self.output.exists())

  def test_recipe_value_error_is_one_line_and_exit_1(self):
    status, _, stderr = self._run("--config.recipe=reject")
    self.assertEqual(status, 1)
    lines = stderr.splitlines()
    self.assertEqual(
        lines[-2], "tunix: error: fake.lr must be below 1, got 0.001"
    )
    self.assertIn("--traceback", lines[-1])
    self.assertNotIn("Traceback", stderr)

  def test_a_full_disk_is_one_line_and_exit_1(self):
    real = main._import_target

    def full(*unused):
      raise OSError(28, "No space left on device", "/data/run")

    with mock.patch.object(
        main,
        "_import_target",
        lambda target: full if target.endswith(":crash") else real(target),
    ):
      status, _, stderr = self._run("--config.recipe=crash")
    self.assertEqual(status, 1)
    self.assertEqual(
        stderr.splitlines()[-2],
        "tunix: error: [Errno 28] No space left on device: '/data/run'",
    )
    self.assertNotIn("Traceback", stderr)

  def test_traceback_flag_reraises(self):
    with self.assertRaisesRegex(ValueError, "fake.lr must be below 1"):
      self._run("--config.recipe=reject", "--traceback")

  def test_ctrl_c_is_one_line_saying_how_to_resume_and_exit_130(self):
    (self.cwd / "interrupted.py").write_text(
        "import ml_collections\n\n\ndef get_config():\n  return"
        " ml_collections.ConfigDict(\n      {'recipe': 'ctrl_c',"
        " 'workdir': 'runs/x', 'output': ''}\n  )\n"
    )
    status, _, stderr = self._run(config="interrupted.py")
    self.assertEqual(status, 130)
    self.assertEqual(stderr.splitlines()[-1], "tunix: interrupted")
    os.makedirs(self.cwd / "runs/x/checkpoints")
    status, _, stderr = self._run(config="interrupted.py")
    self.assertEqual((status, len(stderr.splitlines())), (130, 2))
    self.assertEqual(
        stderr.splitlines()[-1],
        "tunix: interrupted; relaunch with the same workdir (runs/x) to resume"
        " from its last checkpoint",
    )

  @parameterized.parameters(1, 130)
  def test_the_console_script_exits_without_interpreter_shutdown(self, code):
    # Shutdown would print a traceback per background writer still saving
    # (a full disk: Orbax's save, the TensorBoard writer).
    with mock.patch.object(main, "main", return_value=code):
      with mock.patch.object(os, "_exit", side_effect=SystemExit) as exit_:
        with self.assertRaises(SystemExit):
          main.run()
    exit_.assert_called_once_with(code)

  def test_other_exceptions_propagate(self):
    with self.assertRaisesRegex(RuntimeError, "a real bug"):
      self._run("--config.recipe=crash")

  def test_pathways_initialized_before_recipe(self):
    order = []
    fake = types.ModuleType("pathwaysutils")
    # Records whether the recipe had already written its output.
    fake.initialize = lambda: order.append(("pathways", self.output.exists()))
    os.environ["JAX_PLATFORMS"] = "proxy"
    with mock.patch.dict(sys.modules, {"pathwaysutils": fake}):
      self.assertEqual(self._run("--dry_run")[0], 0)
      self.assertEqual(order, [])  # A dry run connects to nothing.
      status, _, stderr = self._run()
    self.assertEqual(status, 0, msg=stderr)
    self.assertEqual(order, [("pathways", False)])
    self.assertTrue(self.output.exists())

  def test_process_setup_runs_first_and_not_on_dry_run(self):
    self.assertEqual(self._run("--dry_run")[0], 0)  # Loads the plugin.
    events = sys.modules["fakeplug_mod"].EVENTS
    events.clear()  # Earlier tests' runs.
    self.assertEqual(self._run("--dry_run")[0], 0)
    self.assertEqual(events, [], msg="a dry run starts nothing")
    fake = types.ModuleType("pathwaysutils")
    fake.initialize = lambda: events.append("pathways")
    os.environ["JAX_PLATFORMS"] = "proxy"
    with mock.patch.dict(sys.modules, {"pathwaysutils": fake}):
      status, _, stderr = self._run()
    self.assertEqual(status, 0, msg=stderr)
    self.assertEqual(events, ["setup", "pathways", "recipe"])
    events.clear()

  def test_pathways_without_pathwaysutils_is_a_usage_error(self):
    os.environ["JAX_PLATFORMS"] = "proxy,cpu"
    with mock.patch.dict(sys.modules, {"pathwaysutils": None}):
      self.assertUsageError(
          self._run(),
          "JAX_PLATFORMS='proxy,cpu' selects Pathways, but pathwaysutils is"
          r" not installed: pip install 'tunix-bd\[pathways\]'$",
      )

  def test_version_and_help(self):
    status, stdout, _ = self._main("--version")
    self.assertEqual(status, 0)
    self.assertRegex(stdout, r"^tunix \d+\.\d+\.\d+\S* ")
    status, stdout, _ = self._main("run", "--help")
    self.assertEqual(status, 0)
    self.assertIn("--config.KEY=VALUE", stdout)
    self.assertIn("--dry_run", stdout)

  def test_help_examples_name_keys_that_exist(self):
    status, stdout, _ = self._main("run", "--help")
    self.assertEqual(status, 0)
    keys = re.findall(r"--config\.([a-z_][\w.]*)=", stdout)
    self.assertNotEmpty(keys)
    for key in keys:
      overrides, _ = config_loading.split_override_args([f"--config.{key}=1"])
      # Every training recipe's config has the example's key (an unknown
      # key is a UsageError).
      for name in ("ar_pretrain", "sft", "opd", "grpo"):
        config = config_loading.load_config(
            _REPO_ROOT / "configs" / f"{name}.py", None
        )
        config_loading.apply_overrides(config, overrides)

  # The real command in a subprocess.

  def test_subprocess_plugins(self):
    result = self._subprocess("plugins")
    self.assertEqual(result.returncode, 0, msg=result.stderr)
    self.assertIn(
        "fakeplug 0.1: A fake plugin for the CLI tests.", result.stdout
    )
    self.assertIn("brokenplug (failed to load", result.stdout)

  def test_subprocess_run_by_name_with_variant_and_overrides(self):
    result = self._subprocess(
        "run",
        "--plugin",
        "fakeplug",
        "fakeconf:big",
        f"--config.output={self.output}",
        "--config.shape",
        "(8, 8)",
        "--config.use_ema=yes",
    )
    self.assertEqual(result.returncode, 0, msg=result.stderr)
    seen = self._seen()
    self.assertEqual(seen["values"]["variant"], "big")
    self.assertEqual(seen["values"]["shape"], [8, 8])
    self.assertEqual(seen["types"]["shape"], "tuple")
    self.assertIs(seen["values"]["use_ema"], True)

  def test_subprocess_compilation_cache_default_flag_and_off(self):
    home = self.create_tempdir().full_path
    env = dict(
        os.environ, HOME=home, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0"
    )
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # The suite's own cache.
    default = os.path.join(home, ".cache", "tunix", "jax")
    given = os.path.join(home, "given")
    argv = ("run", "--plugin", "fakeplug", "fakeconf")
    argv += ("--config.recipe=compile", f"--config.output={self.output}")
    for flag, directory in (
        (("--compilation_cache=",), None),
        ((), default),
        (("--compilation_cache", given), given),
    ):
      result = self._subprocess(*argv, *flag, env=dict(env))
      self.assertEqual(result.returncode, 0, msg=result.stderr)
      seen = self._seen()
      self.assertEqual(seen["enabled"], directory is not None, flag)
      if directory:
        self.assertEqual(seen["cache_dir"], directory)
        self.assertNotEmpty(os.listdir(directory))  # The program, cached.
      else:
        self.assertFalse(os.path.exists(default))
      # Only the default is bounded (LRU): the home directory's disk.
      bounded = directory == default
      self.assertEqual(seen["max_size"], 8 << 30 if bounded else -1)
    # The environment's choice wins over the default; a given directory
    # turns the cache on whatever the environment says.
    for name, value in (
        ("JAX_COMPILATION_CACHE_DIR", given),
        ("JAX_ENABLE_COMPILATION_CACHE", "false"),
    ):
      result = self._subprocess(*argv, env=dict(env, **{name: value}))
      seen = self._seen()
      self.assertEqual(
          (seen["cache_dir"], seen["enabled"]),
          (given, True) if name.endswith("DIR") else (None, False),
          result.stderr,
      )
    result = self._subprocess(
        *argv,
        "--compilation_cache",
        given,
        env=dict(env, JAX_ENABLE_COMPILATION_CACHE="false"),
    )
    self.assertEqual(self._seen()["enabled"], True, result.stderr)

  def test_subprocess_usage_error(self):
    result = self._subprocess("run", "--plugin", "fakeplug", "nope")
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stdout, "")
    self.assertLen(result.stderr.splitlines(), 1)
    self.assertStartsWith(result.stderr, "tunix: error: config 'nope'")

  def test_subprocess_recipe_errors(self):
    argv = ("run", "--plugin", "fakeplug", "fakeconf")
    result = self._subprocess(*argv, "--config.recipe=reject")
    self.assertEqual(result.returncode, 1)
    self.assertIn("tunix: error: fake.lr must be below 1", result.stderr)
    self.assertNotIn("Traceback", result.stderr)
    result = self._subprocess(*argv, "--config.recipe=reject", "--traceback")
    self.assertEqual(result.returncode, 1)
    self.assertIn("Traceback", result.stderr)
    self.assertIn("ValueError: fake.lr must be below 1", result.stderr)
    result = self._subprocess(*argv, "--config.recipe=crash")
    self.assertEqual(result.returncode, 1)
    self.assertIn("RuntimeError: a real bug in the recipe", result.stderr)

  def test_subprocess_run_hides_tunix_cpu_hbm_notice_only(self):
    result = self._subprocess(
        "run", "--plugin", "fakeplug", "fakeconf", "--config.recipe=hbm"
    )
    self.assertEqual(result.returncode, 0, msg=result.stderr)
    self.assertIn("another warning on cpu", result.stderr)
    self.assertNotIn("Skipping non-TPU device", result.stderr)

  def test_orbax_s_background_log_of_a_failed_save_is_dropped_alone(self):
    # The save raises the same error in the recipe: the one error line.
    future = os.path.join("orbax", "checkpoint", "_src", "futures", "future.py")
    record = lambda path, message: logging.LogRecord(
        "absl", logging.ERROR, os.path.join("/site", path), 1, message, (), None
    )
    failed = "_SignalingThread.run() raised an exception: OUT_OF_RANGE: ..."
    self.assertFalse(main._not_noise(record(future, failed)))
    self.assertTrue(main._not_noise(record(future, "another error")))
    self.assertTrue(main._not_noise(record("other.py", failed)))

  def test_cpu_hbm_notice_filter_is_removed_after_the_recipe(self):
    absl_logger = logging.getLogger("absl")
    before = list(absl_logger.filters)
    for recipe in ("dump", "reject"):
      self._run(f"--config.recipe={recipe}")
      self.assertEqual(absl_logger.filters, before)

  def test_subprocess_version(self):
    result = self._subprocess("--version")
    self.assertEqual(result.returncode, 0, msg=result.stderr)
    self.assertRegex(
        result.stdout,
        r"^tunix (\d+\.\d+\.\d+\S*) \(tunix-bd \1, google-tunix \S+;",
    )
    tunix = importlib.metadata.version("google-tunix")
    self.assertIn(f"google-tunix {tunix};", result.stdout)

  def test_host_import_is_light(self):
    code = (
        "import sys; import tunix_bd.cli.main;"
        " print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'jax', 'jaxlib', 'flax', 'tunix', 'numpy'}))"
    )
    env = dict(os.environ, PYTHONPATH=str(_REPO_ROOT))
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    self.assertEqual(result.stdout.strip(), "[]")


if __name__ == "__main__":
  absltest.main()
