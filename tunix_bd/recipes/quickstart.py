# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `quickstart`: AR teacher -> block-diffusion SFT -> evaluation.

Runs the `ar_pretrain` and `sft` stages with their own configs (same
variant, workdirs under this run's), then decodes the eval split with the AR
teacher (Tunix's `Sampler`) and with the converted model at several commit
thresholds, and writes a side-by-side table (`report.txt`, `report.json`)
and a plot of accuracy against speed (`report.png`). Each stage resumes from
its checkpoints, so an interrupted quickstart picks up where it stopped.
"""

from __future__ import annotations

import os

import ml_collections
import numpy as np

from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import ar_eval
from tunix_bd.recipes import ar_pretrain
from tunix_bd.recipes import common
from tunix_bd.recipes import generate
from tunix_bd.recipes import sft


def _stage_config(name: str, variant: str, workdir: str):
  config = config_loading.load_config(
      plugin.PLUGIN.config_dir / f"{name}.py", variant
  )
  config.workdir = os.path.join(workdir, name)
  return config


def _plot(rows: list[dict], path: str) -> None:
  """Accuracy against tokens/s, one point per decoding method."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(6, 4))
  for i, row in enumerate(rows):
    is_ar = row["method"].startswith("AR")
    ax.scatter(
        row["tokens_per_s"],
        100 * row["exact_match"],
        marker="s" if is_ar else "o",
        color="black" if is_ar else "tab:blue",
    )
    ax.annotate(
        row["method"],
        (row["tokens_per_s"], 100 * row["exact_match"]),
        textcoords="offset points",
        # Alternate above and below: the AR rows often sit side by side.
        xytext=(5, 4 if i % 2 == 0 else -11),
        fontsize=8,
    )
  ax.set_xlabel("tokens / s (greedy, cached)")
  ax.set_ylabel("exact match (%)")
  ax.set_title("AR teacher vs block diffusion (embedded task)")
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def _format(rows: list[dict]) -> str:
  lines = [
      f"{'method':<22}{'exact match':>12}{'tokens/fwd':>12}{'tokens/s':>10}"
      f"{'vs AR':>8}"
  ]
  for row in rows:
    lines.append(
        f"{row['method']:<22}{row['exact_match']:>12.1%}"
        f"{row['tokens_per_forward']:>12.2f}{row['tokens_per_s']:>10.1f}"
        f"{row['speedup_vs_ar']:>8.2f}"
    )
  return "\n".join(lines)


def evaluate(config, ar_dir: str, bd_dir: str) -> list[dict]:
  """Decodes the eval prompts with AR and block diffusion; one row each."""
  tokenizer = tokenizer_lib.load_tokenizer(bd_dir)
  mix = tasks_lib.TaskMix(tasks=tuple(config.tasks), seed=0)
  examples = mix.examples("eval", config.num_prompts)
  answers = [e.answer for e in examples]
  tasks = [e.task for e in examples]
  mesh = common.make_mesh(config.mesh)
  rows = []
  with mesh:
    ar_model, _ = hf_checkpoint.load_qwen3(ar_dir, mesh=mesh)
    conversations = [
        dataset_lib.Conversation(e.messages(), e.task, str(i))
        for i, e in enumerate(examples)
    ]
    texts, seconds = ar_eval.timed_greedy_predictions(
        ar_model,
        tokenizer,
        conversations,
        max_new_tokens=config.max_new_tokens,
        batch_size=config.batch_size,
    )
    lengths = [len(tokenizer.encode(t)) for t in texts]
    rows.append({
        "method": "AR (Tunix Sampler)",
        "exact_match": tasks_lib.score_by_task(tasks, texts, answers)["all"],
        "tokens_per_forward": float(np.mean([n / (n + 1) for n in lengths])),
        "tokens_per_s": sum(lengths) / seconds,
    })

    bd = bd_config_lib.load_settings(bd_dir)
    bd_model, _ = hf_checkpoint.load_qwen3(bd_dir, mesh=mesh)
    prompts = [
        chat.encode_prompt(tokenizer, e.messages()[:1]) for e in examples
    ]

    def denoised(method, model, bd, threshold):
      # Greedy, cached, the `threshold` rule.
      result = generate.decode_prompts(
          model,
          tokenizer,
          prompts,
          bd=bd,
          config=generate.denoise_config(
              tokenizer,
              max(len(p) for p in prompts),
              max_new_tokens=config.max_new_tokens,
              threshold=threshold,
          ),
          batch_size=config.batch_size,
      )
      num_tokens = sum(len(tokenizer.encode(t)) for t in result.texts)
      scores = tasks_lib.score_by_task(tasks, result.texts, answers)
      return {
          "method": method,
          "exact_match": scores["all"],
          "tokens_per_forward": float(np.mean(result.tokens_per_forward)),
          "tokens_per_s": num_tokens / result.seconds,
      }

    # The teacher in our decoding loop with one-token blocks: AR decoding,
    # so the BD rows' gain over it is what parallel denoising saves.
    ar_loop = bd_config_lib.BlockDiffusionConfig.autoregressive(
        bd.mask_token_id
    )
    rows.append(denoised("AR, one-token blocks", ar_model, ar_loop, 1.0))
    for threshold in config.thresholds:
      rows.append(
          denoised(f"BD threshold {threshold}", bd_model, bd, threshold)
      )
  for row in rows:
    row["speedup_vs_ar"] = row["tokens_per_s"] / rows[0]["tokens_per_s"]
  return rows


def run(config: ml_collections.ConfigDict) -> list[dict]:
  """Runs the three stages and writes the report; returns its rows."""
  common.require_positive(config, "num_prompts", "batch_size", "max_new_tokens")
  if not config.thresholds or not all(0 < t <= 1 for t in config.thresholds):
    raise ValueError(
        f"thresholds must be values in (0, 1], got {config.thresholds}."
    )
  workdir = config.workdir
  ar_config = _stage_config("ar_pretrain", config.variant, workdir)
  sft_config = _stage_config("sft", config.variant, workdir)
  ar_dir = os.path.join(ar_config.workdir, "export")
  sft_config.model.checkpoint = ar_dir
  ar_pretrain.validate(ar_config)

  print(f"quickstart 1/3: AR teacher -> {ar_config.workdir}")
  ar_pretrain.run(ar_config)
  print(f"quickstart 2/3: block-diffusion SFT -> {sft_config.workdir}")
  sft.run(sft_config)
  bd_dir = os.path.join(sft_config.workdir, "export")
  print("quickstart 3/3: decoding the eval split, AR vs block diffusion")
  rows = evaluate(config, ar_dir, bd_dir)

  table = _format(rows)
  with open(os.path.join(workdir, "report.txt"), "w", encoding="utf-8") as f:
    f.write(table + "\n")
  common.write_json(os.path.join(workdir, "report.json"), rows)
  _plot(rows, os.path.join(workdir, "report.png"))
  print(table)
  print(f"report: {os.path.join(workdir, 'report.txt')} and report.png")
  return rows
