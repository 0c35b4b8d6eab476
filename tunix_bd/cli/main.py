# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `tunix` command: runs the recipes of installed Tunix plugins.

    tunix run --plugin NAME CONFIG[:ARG] [--config.KEY=VALUE ...] [--dry_run]
    tunix plugins
    tunix --version

The host knows nothing of any one plugin (`plugin_api`): it loads and
overrides the config (`config_loading`) and calls the recipe its `recipe`
key names, after the plugin's `process_setup`. Exit status: 2 for a
command-line mistake (one `tunix: error:` line), 1 for a ValueError from the
recipe, 130 on Ctrl-C. The console script is tunix-bd's (google-tunix ships
none; `setup_cfg_test` checks it); `python -m tunix_bd` is the same command.
"""

import argparse
from collections.abc import Callable, Sequence
import functools
import glob
import importlib
import importlib.metadata
import logging as std_logging
import os
import sys
import types
from typing import Any

import ml_collections

import tunix_bd
from tunix_bd.cli import config_loading
from tunix_bd.cli import plugin_api

_PROG = "tunix"
_INTERRUPTED = 130  # 128 + SIGINT, the status a shell reports for Ctrl-C.
_DEFAULT_CACHE = os.path.join("~", ".cache", "tunix", "jax")
_DEFAULT_CACHE_BYTES = 8 << 30

_RUN_EPILOG = f"""\
overrides:
  --config.KEY=VALUE or --config.KEY VALUE, applied in order. KEY is a
  dotted path into the config (--config.train.learning_rate=1e-4; --dry_run
  prints every key). VALUE is parsed as the type of the field it replaces:
  bool (true/false/1/0/yes/no), int, float, str, tuple or list (a Python
  literal: '(1, 2)'). An unknown key or a value of the wrong type is an
  error.

CONFIG is a .py file defining get_config(arg=None), given as a path or as
the name of one of the plugin's configs (`{_PROG} plugins` lists them).
"""


def run(plugin: plugin_api.Plugin | None = None) -> None:
  """The `tunix` console script, on `sys.argv`; `plugin`: one not installed
  (a repository's own) that `tunix run --plugin NAME` of its name uses."""
  status = main(sys.argv[1:], plugin=plugin)
  if status in (1, _INTERRUPTED):
    # Past the one line (an error's or Ctrl-C's), without the interpreter's
    # shutdown: background writers (Orbax's async checkpoint save, the
    # TensorBoard writer of a trainer a full disk stopped) would each print
    # a traceback as their executors close. An unfinished save is never
    # committed, so the relaunch resumes from the last finished checkpoint.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # pylint: disable=protected-access
  sys.exit(status)


def main(
    argv: Sequence[str], *, plugin: plugin_api.Plugin | None = None
) -> int:
  """Runs `tunix` with `argv` (without the program name); returns the exit
  status (module docstring), 0 on success."""
  try:
    overrides, rest = config_loading.split_override_args(argv)
  except plugin_api.UsageError as e:
    return _report(e, status=2)
  try:
    args = _parser().parse_args(rest)
  except SystemExit as e:  # argparse exits for --help, --version and errors.
    return e.code if isinstance(e.code, int) else 2
  if overrides and args.command != "run":
    return _report(
        plugin_api.UsageError("--config.* overrides apply only to `tunix run`"),
        status=2,
    )
  if args.command == "plugins":
    return _list_plugins()
  return _run(args, overrides, plugin)


def _parser() -> argparse.ArgumentParser:
  """Builds the parser; `--config.*` overrides are split off before it."""
  try:
    tunix_version = importlib.metadata.version("google-tunix")
  except importlib.metadata.PackageNotFoundError:
    tunix_version = "not installed"
  parser = argparse.ArgumentParser(
      prog=_PROG,
      description="Run the recipes of installed Tunix plugins.",
      # Keeps the --version line whole (argparse wraps it to the terminal).
      formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
      "--version",
      action="version",
      version=(
          f"{_PROG} {tunix_bd.__version__} (tunix-bd {tunix_bd.__version__},"
          f" google-tunix {tunix_version}; also: python -m tunix_bd)"
      ),
  )
  commands = parser.add_subparsers(dest="command", metavar="COMMAND")
  commands.required = True
  run_parser = commands.add_parser(
      "run",
      usage=(
          f"{_PROG} run [-h] --plugin NAME [--dry_run] [--log_level LEVEL]"
          " [--traceback] [--compilation_cache DIR]"
          " CONFIG[:ARG] [--config.KEY=VALUE ...]"
      ),
      help="run a plugin's recipe with a config",
      description="Load CONFIG from a plugin, apply overrides, run its recipe.",
      epilog=_RUN_EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  run_parser.add_argument(
      "--plugin",
      required=True,
      metavar="NAME",
      help="name of an installed plugin (see `tunix plugins`)",
  )
  run_parser.add_argument(
      "config", metavar="CONFIG[:ARG]", help="config path or name, and ARG"
  )
  run_parser.add_argument(
      "--dry_run",
      "--dry-run",
      action="store_true",
      help=(
          "print the resolved config, check its values as the recipe"
          " would, and exit without running"
      ),
  )
  run_parser.add_argument(
      "--log_level",
      "--log-level",
      choices=("debug", "info", "warning", "error"),
      default="warning",
      help="absl log level of the recipe and its libraries (default: warning)",
  )
  run_parser.add_argument(
      "--traceback",
      action="store_true",
      help="show the full traceback of errors instead of one line",
  )
  run_parser.add_argument(
      "--compilation_cache",
      "--compilation-cache",
      metavar="DIR",
      default=None,
      help=(
          "JAX's persistent compilation cache: a rerun loads the programs"
          " an earlier run compiled ('' turns it off; default:"
          f" $JAX_COMPILATION_CACHE_DIR, else {_DEFAULT_CACHE}; off on"
          " Pathways unless given)"
      ),
  )
  commands.add_parser(
      "plugins",
      help="list installed plugins, their configs and recipes",
      description="List installed plugins, their configs and recipes.",
  )
  return parser


def _run(
    args: argparse.Namespace,
    overrides: Sequence[config_loading.Override],
    local_plugin: plugin_api.Plugin | None,
) -> int:
  """`tunix run`: resolves everything, then calls the recipe."""
  try:
    if local_plugin is not None and local_plugin.name == args.plugin:
      plugin = local_plugin
    else:
      plugin = plugin_api.load_plugin(args.plugin)
    path, arg = config_loading.resolve_config(args.config, plugin)
    config = config_loading.load_config(path, arg)
    applied = config_loading.apply_overrides(config, overrides)
    recipe = _recipe_name(config, plugin)
    pathways = None if args.dry_run else _pathways_module()
  except plugin_api.UsageError as e:
    if args.traceback:
      raise
    return _report(e, status=2)
  described = " ".join(f"{o.key}={o.value!r}" for o in applied) or "none"
  config_label = str(path) if arg is None else f"{path}:{arg}"
  print(
      f"{_PROG}: plugin {plugin.name} {plugin.version} | config"
      f" {config_label} | recipe {recipe} | overrides: {described}",
      file=sys.stderr,
      flush=True,
  )
  if args.dry_run:
    print("overrides:")
    for override in applied:
      print(f"  {override.key} = {override.value!r}")
    if not applied:
      print("  (none)")
    print("config:")
    for line in config_loading.format_config(config):
      print(f"  {line}")
    if recipe in plugin.validators:  # The values, as the recipe checks them.
      try:
        _import_target(plugin.validators[recipe])(config)
      except ValueError as e:
        if args.traceback:
          raise
        return _report(e, status=1)
    return 0
  if plugin.process_setup:
    _import_target(plugin.process_setup)()  # Before anything starts JAX.
  if pathways is not None:
    # Before the recipe imports JAX; never jax.distributed.initialize() here:
    # on Pathways one client sees every device in the job.
    pathways.initialize()
  _use_compilation_cache(args.compilation_cache, pathways is not None)
  recipe_fn = _import_target(plugin.recipes[recipe])
  _configure_logging(args.log_level)
  absl_logger = std_logging.getLogger("absl")
  absl_logger.addFilter(_not_noise)
  try:
    recipe_fn(config)
  except (ValueError, OSError) as e:  # A rejected config; a full disk.
    if args.traceback:
      raise
    _report(e, status=1)
    print(
        f"{_PROG}: run again with --traceback to see the full traceback",
        file=sys.stderr,
    )
    return 1
  except KeyboardInterrupt:
    if args.traceback:
      raise
    print(f"{_PROG}: {_interrupted(config)}", file=sys.stderr)
    return _INTERRUPTED
  finally:
    absl_logger.removeFilter(_not_noise)
  return 0


def _use_compilation_cache(directory: str | None, pathways: bool) -> None:
  """Points JAX's persistent compilation cache at `directory` (None: the
  environment's, else `_DEFAULT_CACHE` off Pathways; '': none), before the
  recipe compiles (JAX opens it once). A rerun (a resume, a second seed)
  then loads the programs compiled before: minutes at size. A hit is the
  executable XLA would build, so nothing a run computes changes."""
  import jax  # pylint: disable=g-import-not-at-top

  if directory is None:
    env_set = jax.config.jax_compilation_cache_dir
    if env_set or not jax.config.jax_enable_compilation_cache or pathways:
      return  # The environment's choice, or no default on Pathways.
    directory = os.path.expanduser(_DEFAULT_CACHE)
    # Bounded (least recently used go): homes are often on small disks.
    jax.config.update("jax_compilation_cache_max_size", _DEFAULT_CACHE_BYTES)
  jax.config.update("jax_enable_compilation_cache", bool(directory))
  if directory:
    jax.config.update("jax_compilation_cache_dir", directory)


def _interrupted(config: ml_collections.ConfigDict) -> str:
  """The Ctrl-C line; says how to resume when the run saved checkpoints (in
  `workdir/checkpoints`, or a chained stage's `workdir/STAGE/checkpoints`).
  """
  workdir = config.get("workdir")
  if isinstance(workdir, str) and workdir:
    saved = glob.glob(os.path.join(glob.escape(workdir), "checkpoints"))
    saved += glob.glob(os.path.join(glob.escape(workdir), "*", "checkpoints"))
    if saved:
      return (
          f"interrupted; relaunch with the same workdir ({workdir}) to resume"
          " from its last checkpoint"
      )
  return "interrupted"


def _not_noise(record: std_logging.LogRecord) -> bool:
  """Drops two records that say nothing the run's own lines do not: Tunix's
  "Skipping non-TPU device: cpu" at every `show_hbm_usage` on CPU, and the
  error of a failed Orbax save its background threads log with a traceback
  (the save raises it again in the recipe: the one error line).
  """
  path, message = record.pathname, record.getMessage()
  hbm = path.endswith(os.path.join("tunix", "sft", "utils.py"))
  orbax = os.path.join("orbax", "checkpoint", "_src", "futures", "future.py")
  return not (
      hbm
      and message.startswith("Skipping non-TPU device: cpu.")
      or path.endswith(orbax)
      and "raised an exception" in message
  )


def _recipe_name(
    config: ml_collections.ConfigDict, plugin: plugin_api.Plugin
) -> str:
  """Returns `config.recipe`, checked against the plugin's recipes."""
  available = ", ".join(sorted(plugin.recipes)) or "none"
  if "recipe" not in config:
    raise plugin_api.UsageError(
        "the config has no 'recipe' key naming what to run; plugin"
        f" {plugin.name!r} provides recipes: {available}"
    )
  recipe = config.recipe
  if not isinstance(recipe, str) or recipe not in plugin.recipes:
    raise plugin_api.UsageError(
        f"unknown recipe {recipe!r} in config.recipe; plugin"
        f" {plugin.name!r} provides recipes: {available}"
    )
  return recipe


def _import_target(target: str) -> Callable[..., Any]:
  """Imports `"package.module:function"` (the function may be dotted)."""
  module_name, _, attribute = target.partition(":")
  module = importlib.import_module(module_name)
  return functools.reduce(getattr, attribute.split("."), module)


def _pathways_module() -> types.ModuleType | None:
  """`pathwaysutils` when JAX_PLATFORMS selects Pathways (a UsageError if it
  is missing), else None."""
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if "proxy" not in platforms:
    return None
  try:
    import pathwaysutils  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise plugin_api.UsageError(
        f"JAX_PLATFORMS={platforms!r} selects Pathways, but pathwaysutils is"
        " not installed: pip install 'tunix-bd[pathways]'"
    ) from e
  return pathwaysutils


def _configure_logging(level: str) -> None:
  """Routes absl logs at `level` to stderr, as `absl.app.run` would."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top

  if not flags.FLAGS.is_parsed():
    # Defaults only: libraries that read absl flags then find them parsed.
    flags.FLAGS([_PROG])
  logging.use_absl_handler()
  logging.set_verbosity(level)


def _list_plugins() -> int:
  """`tunix plugins`: one block per plugin; load failures are listed too."""
  installed = plugin_api.discover_plugins()
  if not installed:
    print(
        "no plugins installed (plugins declare an entry point in the"
        f" {plugin_api.ENTRY_POINT_GROUP!r} group)"
    )
    return 0
  for name, entry_point in installed.items():
    try:
      plugin = plugin_api.load_plugin(name)
    except Exception as e:  # pylint: disable=broad-exception-caught
      # One broken plugin must not hide the others.
      error = f"{type(e).__name__}: {e}".replace("\n", " ")
      print(f"{name} (failed to load {entry_point.value}): {error}")
      continue
    header = f"{plugin.name} {plugin.version}"
    print(f"{header}: {plugin.description}" if plugin.description else header)
    configs = config_loading.available_configs(plugin.config_dir)
    print(f"  configs ({plugin.config_dir}):")
    width = max((len(stem) for stem in configs), default=0)
    for stem, path in configs.items():
      summary = config_loading.config_summary(path)
      print(f"    {stem:<{width}}  {summary}".rstrip())
    if not configs:
      print("    (none)")
    print("  recipes:")
    width = max(map(len, plugin.recipes), default=0)
    for recipe, target in sorted(plugin.recipes.items()):
      print(f"    {recipe:<{width}}  {target}")
    for kind, names in plugin.registers.items():
      print(f"  {kind}: {', '.join(names) or '-'}")
  return 0


def _report(error: BaseException, status: int) -> int:
  print(f"{_PROG}: error: {error}", file=sys.stderr)
  return status
