# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `quickstart`: AR teacher -> block-diffusion SFT -> evaluation.

Runs the `ar_pretrain` and `sft` stages with their own configs (same
variant, workdirs under this run's), then decodes the eval split with the AR
teacher (Tunix's `Sampler`, and our loop with one-token blocks) and with the
converted model at several commit thresholds (`evaluation.comparison`), and
writes a side-by-side table (`report.txt`, `report.json`) with a headline
(batch-1 latency and batch-N throughput, with tokens per forward), a figure
of speed relative to AR (`report.png`) and the speed/accuracy frontier
(`frontier.png`, exact match vs tokens per forward per model stage). Each stage resumes from its
checkpoints, so an interrupted quickstart picks up where it stopped.
"""

from __future__ import annotations

import os
import time

import jax
import ml_collections

from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import comparison
from tunix_bd.evaluation import plot
from tunix_bd.evaluation import report
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import ar_pretrain
from tunix_bd.recipes import sft


def _stage_config(variant: str, workdir: str, name: str):
  config = config_files.get_config(name, variant)
  config.workdir = os.path.join(workdir, name)
  config.lock()
  return config


def _validate(config: ml_collections.ConfigDict) -> None:
  for key in (
      "num_prompts",
      "batch_size",
      "max_new_tokens",
      "latency_prompts",
      "repeats",
  ):
    config_utils.check_int(key, config[key], 1)
  if config.latency_prompts > config.num_prompts:
    raise ValueError(
        f"latency_prompts={config.latency_prompts} must be <= "
        f"num_prompts={config.num_prompts}."
    )
  if not config.thresholds or not all(0 < t <= 1 for t in config.thresholds):
    raise ValueError(
        f"thresholds must be values in (0, 1], got {config.thresholds}."
    )


def _machine() -> str:
  device = jax.devices()[0]
  if device.platform == "cpu":
    return f"CPU, {os.cpu_count()} cores"
  return f"{jax.device_count()} x {device.device_kind}"


def evaluate(config, ar_dir: str, bd_dir: str) -> list[dict]:
  """Decodes the eval prompts with AR and block diffusion; one row each."""
  tokenizer = tokenizer_lib.load_tokenizer(bd_dir)
  mix = tasks_lib.TaskMix(tasks=tuple(config.tasks), seed=0)
  examples = mix.examples("eval", config.num_prompts)
  mesh = mesh_lib.from_section(config.mesh)
  with mesh_lib.tunix_context(mesh):
    ar_model, _ = hf_checkpoint.load_qwen3(ar_dir, mesh=mesh)
    bd_model, _ = hf_checkpoint.load_qwen3(bd_dir, mesh=mesh)
    return comparison.compare(
        ar_model,
        bd_model,
        tokenizer,
        bd_config_lib.load_settings(bd_dir),
        examples,
        thresholds=config.thresholds,
        max_new_tokens=config.max_new_tokens,
        batch_size=config.batch_size,
        latency_prompts=config.latency_prompts,
        repeats=config.repeats,
        log=lambda line: print(line, flush=True),
    )


def _write_report(config, rows: list[dict], seconds: float) -> str:
  workdir = config.workdir
  table = comparison.format_table(rows, config.batch_size)
  caption = (
      f"{config.num_prompts} eval prompts of {', '.join(config.tasks)};"
      f" greedy, {config.max_new_tokens}-token budget, cached. Batch 1:"
      f" ms per prompt over {config.latency_prompts} prompts; batch"
      f" {config.batch_size}: tokens/s over all prompts; methods"
      f" interleaved, each batch's fastest of {config.repeats} passes."
      f" {_machine()}."
  )
  headline = comparison.headline(rows, config.batch_size)
  files.write_text(
      os.path.join(workdir, "report.txt"), f"{table}\n{caption}\n{headline}\n"
  )
  report.write_json(
      os.path.join(workdir, "report.json"),
      {
          "rows": rows,
          "headline": headline,
          "machine": _machine(),
          "seconds": seconds,
      },
  )
  plot.plot_comparison(
      rows,
      os.path.join(workdir, "report.png"),
      batch_size=config.batch_size,
      title="AR teacher vs its block-diffusion conversion (embedded task)",
      caption=caption,
  )
  plot.plot_frontier(
      comparison.frontier(rows),
      os.path.join(workdir, "frontier.png"),
      title="Speed/accuracy frontier: exact match vs tokens per forward",
      caption=(
          f"{config.num_prompts} eval prompts of {', '.join(config.tasks)};"
          " greedy; points of the block-diffusion model are commit"
          " thresholds; the ceiling is every block an answer and its stop"
          f" token touch decoded in one forward. {_machine()}."
      ),
      ceiling=next(
          r["tpf_ceiling"] for r in rows if r["tpf_ceiling"] is not None
      ),
  )
  return f"{table}\n{caption}\n{headline}"


def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the three stages and writes the report; returns its rows."""
  _validate(config)
  start = time.monotonic()
  workdir = config.workdir
  ar_config = _stage_config(config.variant, workdir, "ar_pretrain")
  ar_dir = os.path.join(ar_config.workdir, "export")
  sft_config = _stage_config(config.variant, workdir, "sft")
  sft_config.model.checkpoint = ar_dir
  ar_pretrain.validate(ar_config)

  print(f"quickstart 1/3: AR teacher -> {ar_config.workdir}", flush=True)
  ar_pretrain.run(ar_config)
  print(
      f"quickstart 2/3: block-diffusion SFT -> {sft_config.workdir}",
      flush=True,
  )
  sft.run(sft_config)
  bd_dir = os.path.join(sft_config.workdir, "export")
  print(
      "quickstart 3/3: decoding the eval split, AR vs block diffusion",
      flush=True,
  )
  rows = evaluate(config, ar_dir, bd_dir)
  print(_write_report(config, rows, time.monotonic() - start))
  next_command = "tunix run --plugin tunix_bd generate.py"
  default_model = config_files.get_config("generate").model.checkpoint
  if os.path.abspath(bd_dir) != os.path.abspath(default_model):
    next_command += f" --config.model.checkpoint={bd_dir}"
  print(
      f"report: {os.path.join(workdir, 'report.txt')}, report.png and"
      " frontier.png "
      f"({time.monotonic() - start:.0f} s in all). Next, decode with the "
      f"converted model: {next_command}"
  )
  return rows
