# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""An AR checkpoint vs its block-diffusion conversion, as a report.

What the quickstart ends with and `compare.py` runs on a user's own models:
the methods of `comparison` decode the prompts, all greedy and cached, timed
at batch 1 and batch N interleaved (`speed.measure`), into
`report.{txt,json,png}` and `frontier.png`. docs/results.md, "How speeds are
measured, and what reproduces".
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping, Sequence

import jax

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import scoring
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import comparison
from tunix_bd.evaluation import plot
from tunix_bd.evaluation import report
from tunix_bd.evaluation import speed
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import hf_checkpoint


@dataclasses.dataclass(frozen=True)
class Settings:
  """How the comparison decodes and times.

  Attributes:
    thresholds: commit thresholds of the converted model, in (0, 1].
    max_new_tokens: the completion budget of every method.
    batch_size: rows per batch of the throughput measurement.
    latency_prompts: prompts of the batch-1 latency measurement.
    repeats: interleaved passes; each batch counts its fastest.
  """

  thresholds: tuple[float, ...]
  max_new_tokens: int
  batch_size: int
  latency_prompts: int
  repeats: int

  @classmethod
  def from_config(cls, config: Any, num_prompts: int) -> Settings:
    """The settings of a config's top-level keys, checked before compute.

    Raises:
      ValueError: naming the key, for a value that cannot work with
        `num_prompts` prompts.
    """
    for key in ("batch_size", "max_new_tokens", "latency_prompts", "repeats"):
      config_utils.check_int(key, config[key], 1)
    if config.latency_prompts > num_prompts:
      raise ValueError(
          f"latency_prompts={config.latency_prompts} must be <= the"
          f" {num_prompts} prompts."
      )
    thresholds = tuple(config.thresholds)
    if not thresholds or not all(
        isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t <= 1
        for t in thresholds
    ):
      raise ValueError(
          f"thresholds must be values in (0, 1], got {config.thresholds}."
      )
    return cls(
        thresholds,
        config.max_new_tokens,
        config.batch_size,
        config.latency_prompts,
        config.repeats,
    )


def check_converted(model: Any) -> None:
  """Fails closed, naming the key, unless `model.bd` is a converted model.

  `model` is `compare.py`'s `model` section (`ar`, `bd`); `run.stage.Stage`
  checks the directories themselves.
  """
  if not os.path.isfile(os.path.join(model.bd, bd_config_lib.SETTINGS_FILE)):
    raise ValueError(
        f"model.bd={model.bd!r} has no"
        f" {bd_config_lib.SETTINGS_FILE}: it is not a block-diffusion"
        " model; convert it with sft.py first."
    )


def conversion_warning(model: Any, identify: Callable[[str], Any]) -> str:
  """The report's warning line when `model.bd` was converted from another
  model than `model.ar`, else "".

  `sft.py`'s export records `converted_from` (its AR source's digest); a
  model trained further (OPD, GRPO) or imported records none and is not
  checked. `identify` is `Stage.identify`.
  """
  source = bd_config_lib.load_extra(model.bd, "converted_from")
  if (
      source is None
      or source.get("digest") == identify(model.ar).provenance()["digest"]
  ):
    return ""
  named = source.get("path") or (
      "a random model"
      if source.get("random_init")
      else f"digest {source.get('digest')}"
  )
  return (
      f"WARNING: model.bd={model.bd!r} was converted from another checkpoint"
      f" ({named}) than model.ar={model.ar!r}, so this report does not"
      " compare a model with its own conversion."
  )


def machine() -> str:
  """The device the figures were measured on, for captions."""
  device = jax.devices()[0]
  if device.platform == "cpu":
    return f"CPU, {os.cpu_count()} cores"
  return f"{jax.device_count()} x {device.device_kind}"


def evaluate(
    ar_dir: str,
    bd_dir: str,
    records: Sequence[Mapping[str, Any]],
    settings: Settings,
    mesh_section: Any,
    *,
    chat_template: str = "",
    chat_options: chat.ChatOptions = chat.ChatOptions(),
) -> list[dict[str, Any]]:
  """Decodes `records` with both checkpoints; one row per method.

  Ratios are against Tunix's `Sampler` (row 0). Each record is
  `{"messages", "answer", "task"}`: the messages rendered with the chat
  template are the prompt; the completion is scored against `answer`
  (`scoring.score_by_task`). `chat_template` is a Jinja file replacing the
  tokenizer's, or "".

  Returns:
    Rows with `method`, `threshold` (None for AR), `exact_match`,
    `tokens_per_forward`, `batch1_ms` (ms per prompt at batch 1),
    `batch1_speedup_vs_ar` (the Sampler's ms over this method's),
    `tokens_per_s` (at `batch_size`), `throughput_vs_ar`, for block
    diffusion `tpf_ceiling` (`comparison.tpf_ceiling` of the prompts at
    its block size), and the spread over repeats, `[min, max]` of each
    speed with every batch at its fastest or slowest repeat:
    `batch1_ms_range`, `tokens_per_s_range`.
  """
  tokenizer = tokenizer_lib.load_tokenizer(bd_dir, chat_template)
  mesh = mesh_lib.from_section(mesh_section)
  with mesh_lib.tunix_context(mesh):
    ar_model, _ = hf_checkpoint.load(ar_dir, mesh=mesh)
    bd_model, _ = hf_checkpoint.load(bd_dir, mesh=mesh)
    bd = bd_config_lib.load_settings(bd_dir)
    ids = [
        chat.encode_prompt(tokenizer, r["messages"], chat_options)
        for r in records
    ]
    width, budget = max(len(p) for p in ids), settings.max_new_tokens

    def denoiser(model, model_bd, threshold):
      config = settings_lib.denoise_config(
          tokenizer, width, max_new_tokens=budget, threshold=threshold
      )
      return speed.denoiser_decoder(
          model, tokenizer, bd=model_bd, config=config
      )

    decoders = {
        comparison.AR_SAMPLER: ar_sampler.greedy_decoder(
            ar_model, tokenizer, max_prompt_length=width, max_new_tokens=budget
        ),
        comparison.AR_LOOP: denoiser(
            ar_model,
            bd_config_lib.BlockDiffusionConfig.autoregressive(bd.mask_token_id),
            1.0,
        ),
        **{
            comparison.threshold_method(t): denoiser(bd_model, bd, t)
            for t in settings.thresholds
        },
    }
    inputs = {m: ids for m in decoders}
    inputs[comparison.AR_SAMPLER] = [tokenizer.decode(p) for p in ids]
    repeats, batch_size = settings.repeats, settings.batch_size
    print(
        f"  batch 1: {settings.latency_prompts} prompts x {len(decoders)}"
        f" methods x {repeats} repeats",
        flush=True,
    )
    latency = speed.measure(
        decoders,
        {m: rows[: settings.latency_prompts] for m, rows in inputs.items()},
        batch_size=1,
        repeats=repeats,
    )
    print(
        f"  batch {batch_size}: {len(ids)} prompts x {len(decoders)} methods"
        f" x {repeats} repeats",
        flush=True,
    )
    throughput = speed.measure(
        decoders, inputs, batch_size=batch_size, repeats=repeats
    )
  answers = [r["answer"] for r in records]
  tasks = [r["task"] for r in records]
  ar_latency = latency[comparison.AR_SAMPLER].seconds_per_row
  ar_rate = throughput[comparison.AR_SAMPLER].tokens_per_s
  thresholds_of = {
      comparison.threshold_method(t): t for t in settings.thresholds
  }
  ceiling = comparison.tpf_ceiling(
      [len(p) for p in ids],
      [len(tokenizer.encode(a, add_special_tokens=False)) for a in answers],
      bd.block_size,
  )
  rows = []
  for method, timing in throughput.items():
    tokens, lat = float(timing.num_tokens.sum()), latency[method]
    rows.append({
        "method": method,
        "threshold": thresholds_of.get(method),
        "exact_match": scoring.score_by_task(tasks, timing.texts, answers)[
            "all"
        ],
        "tokens_per_forward": timing.tokens_per_forward,
        "batch1_ms": 1e3 * latency[method].seconds_per_row,
        "batch1_speedup_vs_ar": ar_latency / latency[method].seconds_per_row,
        "tokens_per_s": timing.tokens_per_s,
        "throughput_vs_ar": timing.tokens_per_s / max(ar_rate, 1e-9),
        "tpf_ceiling": ceiling if method in thresholds_of else None,
        "batch1_ms_range": [
            1e3 * lat.seconds_per_row,
            1e3 * lat.slowest_seconds / len(lat.texts),
        ],
        "tokens_per_s_range": [
            tokens / max(timing.slowest_seconds, 1e-9),
            timing.tokens_per_s,
        ],
    })
  return rows


def write_report(
    workdir: str,
    rows: Sequence[dict[str, Any]],
    settings: Settings,
    *,
    prompts: str,
    title: str,
    seconds: float,
    warning: str = "",
) -> str:
  """Writes `report.*` and `frontier.png` under `workdir`; returns the text.

  `prompts` describes the prompts for captions (e.g. "256 eval prompts of
  sort, reverse"); `seconds` (the run's wall time so far) goes to
  `report.json`; `warning` (e.g. `conversion_warning`), if not "", heads
  `report.txt` and is kept in `report.json`.
  """
  table = comparison.format_table(rows, settings.batch_size)
  caption = (
      f"{prompts}; greedy, {settings.max_new_tokens}-token budget, cached."
      f" Batch 1: ms per prompt over {settings.latency_prompts} prompts;"
      f" batch {settings.batch_size}: tokens/s over all prompts; methods"
      " interleaved, each batch's fastest of"
      f" {settings.repeats} passes (error bars: its slowest). {machine()}."
  )
  headline = comparison.headline(rows, settings.batch_size)
  text = f"{table}\n{caption}\n{headline}"
  if warning:
    text = f"{warning}\n{text}"
  files.write_text(os.path.join(workdir, "report.txt"), f"{text}\n")
  report.write_json(
      os.path.join(workdir, "report.json"),
      {
          "rows": list(rows),
          "headline": headline,
          "machine": machine(),
          "seconds": seconds,
          "warning": warning or None,
      },
  )
  plot.plot_comparison(
      rows,
      os.path.join(workdir, "report.png"),
      batch_size=settings.batch_size,
      title=title,
      caption=caption,
  )
  plot.plot_frontier(
      rows,
      os.path.join(workdir, "frontier.png"),
      batch_size=settings.batch_size,
      caption=(
          f"{prompts}; greedy; points of the block-diffusion model are"
          " commit thresholds, the ringed one the headline's; the ceiling is"
          " every block an answer and its stop token touch decoded in one"
          " forward; error bars: each batch's fastest to slowest of"
          f" {settings.repeats} passes. {machine()}."
      ),
  )
  return text
