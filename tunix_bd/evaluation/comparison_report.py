# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""An AR checkpoint vs its block-diffusion conversion, as a report.

What the quickstart ends with and `compare.py` runs: the methods of
`comparison` decode the prompts, greedy and cached, timed interleaved
(`speed.measure`), into `report.{txt,json,png}` and `frontier.png`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, ClassVar, Mapping, Sequence

from flax import nnx
import jax
import numpy as np

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import layer_scan
from tunix_bd.data import chat
from tunix_bd.data import scoring
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import comparison
from tunix_bd.evaluation import pair
from tunix_bd.evaluation import plot
from tunix_bd.evaluation import report
from tunix_bd.evaluation import speed
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token
from tunix_bd.models import precision as precision_lib


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
  """How the comparison decodes and times: `compare`'s top-level keys
  (docs/recipes.md, "What `compare` and the quickstart's comparison time").

  Attributes:
    thresholds: commit thresholds of the converted model, in (0, 1].
    max_new_tokens: the completion budget of every method.
    batch_size: rows per batch of the throughput and accuracy pass.
    latency_prompts: prompts of the batch-1 latency measurement.
    repeats: interleaved passes; each batch counts its fastest.
    extra_batch_sizes: more batch sizes whose throughput is measured.
    extra_batches: batches each extra batch size is timed on.
  """

  SECTION: ClassVar[str] = ""  # Top-level keys (`run.stage.Stage`).

  thresholds: tuple[float, ...]
  max_new_tokens: int
  batch_size: int
  latency_prompts: int
  repeats: int
  extra_batch_sizes: tuple[int, ...] = ()
  extra_batches: int = 2

  def __post_init__(self):
    """Fails closed, naming the key, on a value that cannot work."""
    for key in ("batch_size", "max_new_tokens", "latency_prompts", "repeats"):
      config_utils.check_int(key, getattr(self, key), 1)
    thresholds = self.thresholds
    if (
        not isinstance(thresholds, (tuple, list))
        or not thresholds
        or not all(map(config_utils.is_threshold, thresholds))
    ):
      raise ValueError(
          f"thresholds must be values in (0, 1], got {self.thresholds}."
      )
    for size in self.extra_batch_sizes:
      config_utils.check_int("extra_batch_sizes", size, 1)
    config_utils.check_int("extra_batches", self.extra_batches, 1)
    object.__setattr__(self, "thresholds", tuple(self.thresholds))
    object.__setattr__(self, "extra_batch_sizes", tuple(self.extra_batch_sizes))

  def check_prompts(self, num_prompts: int) -> None:
    """Fails closed unless `latency_prompts` fits `num_prompts` prompts."""
    if self.latency_prompts > num_prompts:
      raise ValueError(
          f"latency_prompts={self.latency_prompts} must be <= the"
          f" {num_prompts} prompts."
      )


def ar_loop(
    ar_model: Any, mask_token_id: int
) -> tuple[Any, bd_config_lib.BlockDiffusionConfig]:
  """The model and settings of the AR loop (`comparison.AR_LOOP`).

  Its mask id must be one the model never predicts: the conversion's, or a
  masked row added to a copy of the model (`mask_token.resize_vocab`) when
  the id lies past the AR vocabulary.
  """
  vocab_size = ar_model.config.vocab_size
  if mask_token_id >= vocab_size:
    ar_model, mask_token_id = mask_token.resize_vocab(ar_model)[0], vocab_size
  bd = bd_config_lib.BlockDiffusionConfig.autoregressive(mask_token_id)
  return ar_model, bd


def evaluate(
    models: pair.Models,
    records: Sequence[Mapping[str, Any]],
    settings: Settings,
    mesh: jax.sharding.Mesh,
    precision: precision_lib.Precision = precision_lib.Precision(),
    scan_layers: bool = False,
) -> list[dict[str, Any]]:
  """Decodes `records` with both checkpoints, at `precision`; one row per
  method (`scan_layers`: `denoise.DenoiseConfig.scan_layers` for our loop
  and block diffusion).

  Each record is `{"messages", "answer", "task"}`: the messages, rendered
  as `model.bd` was trained, are the prompt; the completion is scored
  against `answer` (`scoring.score_by_task`). AR methods decode with the AR
  tokenizer, block diffusion with the converted model's. Prompts and budget
  are checked against both models' positions before they load.

  Returns:
    Rows with `method`, `threshold` (None for AR), `exact_match`,
    `final_answer` (`scoring.final_answer`), `tokens_per_forward`,
    `batch1_ms` (ms per prompt), `batch1_ms_per_forward` (`batch1_ms` over
    its forwards), `batch1_speedup_vs_ar` (the Sampler's ms over this
    method's), `tokens_per_s` (at `batch_size`), `throughput_vs_ar`,
    `tokens_per_s_at` (`{str(batch): tokens/s}` of `extra_batch_sizes`,
    each over its first `extra_batches` batches), `num_params` (of the model
    it decodes with), `mean_answer_tokens` (stop token excluded), `dtype`
    (both models' compute dtype), `layers_scanned` (whether its decoding
    scanned the layers), `tpf_ceiling` (block diffusion's,
    `comparison.tpf_ceiling`; else None) and `[min, max]` over repeats of
    the speeds: `batch1_ms_range`, `tokens_per_s_range`.
  """
  tokenizer, bd = models.bd.tokenizer, models.bd.bd
  ids = [
      chat.encode_prompt(
          tokenizer, r["messages"], models.bd.chat_options, f"prompt {i}"
      )
      for i, r in enumerate(records)
  ]
  width, budget = max(len(p) for p in ids), settings.max_new_tokens
  longest = max(range(len(ids)), key=lambda i: len(ids[i]))
  for key, path in (("model.ar", models.ar_dir), ("model.bd", models.bd.path)):
    hf_checkpoint.check_positions(
        hf_checkpoint.read_config(path),
        width,
        budget,
        what=(
            f"prompt {longest} (0-based, {width} tokens) plus"
            f" max_new_tokens={budget}"
        ),
        model_key=key,
    )
  start = time.monotonic()
  # Each phase's start and the time so far: a long comparison (a model of
  # realistic size on long answers) shows where it is, also in a log file.
  say = lambda what: print(
      f"  {what} ({time.monotonic() - start:.0f} s)", flush=True
  )
  with mesh_lib.tunix_context(mesh):
    ar_model, _ = precision_lib.load(
        models.ar_dir, precision, mesh=mesh, decoding_only=True
    )
    bd_model = models.bd.load(mesh, precision).model
    scanned = {
        name: scan_layers and layer_scan.can_scan(model)
        for name, model in (("ar", ar_model), ("bd", bd_model))
    }

    def denoiser(model, model_bd, threshold, model_tokenizer=tokenizer):
      config = settings_lib.denoise_config(
          model_tokenizer,
          width,
          max_new_tokens=budget,
          threshold=threshold,
          scan_layers=scan_layers,
      )
      return speed.denoiser_decoder(
          model, model_tokenizer, bd=model_bd, config=config
      )

    decoders = {
        comparison.AR_SAMPLER: ar_sampler.greedy_decoder(
            ar_model,
            models.ar_tokenizer,
            max_prompt_length=width,
            max_new_tokens=budget,
        ),
        comparison.AR_LOOP: denoiser(
            *ar_loop(ar_model, bd.mask_token_id), 1.0, models.ar_tokenizer
        ),
        **{
            comparison.threshold_method(t): denoiser(bd_model, bd, t)
            for t in settings.thresholds
        },
    }
    inputs = {m: ids for m in decoders}
    inputs[comparison.AR_SAMPLER] = [models.ar_tokenizer.decode(p) for p in ids]
    repeats, batch_size = settings.repeats, settings.batch_size

    def timed(size: int, rows: int) -> dict[str, speed.Timing]:
      """Every method on the first `rows` prompts at batch `size`, logged."""
      say(
          f"batch {size}: {rows} prompts ({-(-rows // size)} batches) x"
          f" {len(decoders)} methods x {repeats} repeats"
      )
      begin = time.monotonic()
      timings = speed.measure(
          decoders,
          {m: r[:rows] for m, r in inputs.items()},
          batch_size=size,
          repeats=repeats,
      )
      compiling = sum(t.warmup_seconds for t in timings.values())
      say(
          f"batch {size} done: {time.monotonic() - begin:.0f} s,"
          f" {compiling:.0f} s of it the methods' first batches (compiling)"
      )
      return timings

    latency = timed(1, settings.latency_prompts)
    throughput = timed(batch_size, len(ids))
    # What the run has measured so far, in the log: a run cut short in a
    # later pass still shows every method's accuracy and both speeds.
    for method, timing in throughput.items():
      say(
          f"{method}: {_score(records, timing, final=True):.1%} final"
          f" answer, {timing.tokens_per_forward:.2f} tokens per forward,"
          f" {1e3 * latency[method].seconds_per_row:.2f} ms per prompt at"
          f" batch 1, {timing.tokens_per_s:.0f} tokens/s at batch"
          f" {batch_size}"
      )
    # Speed alone (decoding is batch-invariant): a few batches of each size.
    at_batch = {
        size: timed(size, min(len(ids), size * settings.extra_batches))
        for size in settings.extra_batch_sizes
    }
    say("done")
    # Parameters counted once (a tied head is the table).
    num_params = {
        name: int(sum(x.size for x in jax.tree.leaves(nnx.state(m, nnx.Param))))
        for name, m in (("ar", ar_model), ("bd", bd_model))
    }
  answers = [r["answer"] for r in records]
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
    score = lambda final: _score(records, timing, final=final)
    fast = latency[method]
    tokens = float(timing.num_tokens.sum())
    rows.append({
        "method": method,
        "threshold": thresholds_of.get(method),
        "exact_match": score(final=False),
        "final_answer": score(final=True),
        "tokens_per_forward": timing.tokens_per_forward,
        "batch1_ms": 1e3 * fast.seconds_per_row,
        "batch1_ms_per_forward": 1e3 * fast.seconds / fast.num_forwards.sum(),
        "batch1_speedup_vs_ar": ar_latency / fast.seconds_per_row,
        "tokens_per_s": timing.tokens_per_s,
        "throughput_vs_ar": timing.tokens_per_s / max(ar_rate, 1e-9),
        "tokens_per_s_at": {
            str(size): timings[method].tokens_per_s
            for size, timings in at_batch.items()
        },
        "num_params": num_params["bd" if method in thresholds_of else "ar"],
        # The text's own tokens: decoders differ on counting the stop token.
        "mean_answer_tokens": float(
            np.mean([
                len(tokenizer.encode(t, add_special_tokens=False))
                for t in timing.texts
            ])
        ),
        "dtype": precision.dtype,
        "layers_scanned": (
            method != comparison.AR_SAMPLER
            and scanned["bd" if method in thresholds_of else "ar"]
        ),
        "tpf_ceiling": ceiling if method in thresholds_of else None,
        "batch1_ms_range": [
            1e3 * fast.seconds_per_row,
            1e3 * fast.slowest_seconds / len(fast.texts),
        ],
        "tokens_per_s_range": [
            tokens / max(timing.slowest_seconds, 1e-9),
            timing.tokens_per_s,
        ],
    })
  return rows


def _score(
    records: Sequence[Mapping[str, Any]], timing: speed.Timing, *, final: bool
) -> float:
  """A method's accuracy over all records (`final`: on the result line)."""
  return scoring.score_by_task(
      [r["task"] for r in records],
      timing.texts,
      [r["answer"] for r in records],
      final=final,
  )["all"]


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

  `prompts` describes the prompts for captions; `seconds` (wall time so
  far) goes to `report.json`; a `warning` heads `report.txt` and is kept.
  """
  table = comparison.format_table(rows, settings.batch_size)
  caption = (
      f"{prompts}; greedy, {settings.max_new_tokens}-token budget, cached."
      f" Batch 1: ms per prompt over {settings.latency_prompts} prompts;"
      f" batch {settings.batch_size}: tokens/s over all prompts; methods"
      " interleaved, each batch's fastest of"
      f" {settings.repeats} passes (error bars: its slowest)."
      + "".join(
          f" Batch {b}: tokens/s over its first {settings.extra_batches}"
          " batches (fewer where the prompts end)."
          for b in settings.extra_batch_sizes
      )
      + f" {report.machine()}."
  )
  headline = comparison.headline(rows, settings.batch_size)
  summary = comparison.parallelism_summary(rows)
  text = f"{table}\n{caption}\n{summary}\n{headline}"
  if warning:
    text = f"{warning}\n{text}"
  files.write_text(os.path.join(workdir, "report.txt"), f"{text}\n")
  report.write_json(
      os.path.join(workdir, "report.json"),
      {
          "rows": list(rows),
          "headline": headline,
          "machine": report.machine(),
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
          f" {settings.repeats} passes. {report.machine()}."
      ),
  )
  return text
