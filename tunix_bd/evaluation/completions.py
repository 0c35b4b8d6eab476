# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A prompt set decoded by a converted model: settings, completions, summary.

The `generate` recipe's pieces: `GenerateSettings`, its typed sections
(`validate` builds and checks them all before any model is read);
`write_completions`, one JSON line per prompt (completion, correctness,
forwards, tokens per forward); and `summarize`, the figures it returns and
the lines it prints (exact match per task, tokens per forward, tokens/s,
the replay check's largest error).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Sequence

import numpy as np

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd.data import scoring
from tunix_bd.data import settings as data_settings
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as settings_lib
from tunix_bd.run import sections
from tunix_bd.run import workdir as workdir_lib

# Under `workdir` when `output` is empty.
COMPLETIONS_FILE = "completions.jsonl"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerateSettings:
  """The `generate` recipe's settings, checked.

  Attributes:
    model: the converted model and the compute precision.
    bd: what the checkpoint's block-diffusion settings must be.
    decode: how to decode.
    data: the prompts.
    output: the completions' path (`output`, or `workdir`'s
      `completions.jsonl`).
    verify_replay: also replay every trace and report the largest
      |replayed - recorded| log-prob.
  """

  model: sections.DecodeModelSettings
  bd: settings_lib.CheckpointBdSettings
  decode: settings_lib.DecodeSettings
  data: data_settings.PromptDataSettings
  output: str
  verify_replay: bool


def validate(config: Any) -> GenerateSettings:
  """Every section of a `generate` config, before any model is read.

  The output first, then every section's values, then the checkpoint
  directory (so a bad setting is reported even without a model).

  Raises:
    ValueError: naming the key, for the first bad value.
  """
  if config.output:
    workdir_lib.check_file(config.output, "output")
  else:
    workdir_lib.check(config.workdir)
  decode = config_utils.from_section(
      settings_lib.DecodeSettings, config.decode, "decode"
  )
  model = config_utils.from_section(
      sections.DecodeModelSettings, config.model, "model"
  )
  bd = config_utils.from_section(
      settings_lib.CheckpointBdSettings, config.bd, "bd"
  )
  data = config_utils.from_section(
      data_settings.PromptDataSettings, config.data, "data"
  )
  sections.check_directories(model)
  return GenerateSettings(
      model=model,
      bd=bd,
      decode=decode,
      data=data,
      output=config.output or os.path.join(config.workdir, COMPLETIONS_FILE),
      verify_replay=config.verify_replay,
  )


def write_completions(
    path: str,
    records: Sequence[dict[str, Any]],
    result: prompt_batches.DecodeResult,
) -> None:
  """One JSON line per prompt: its completion, correctness and cost.

  Args:
    path: the JSONL file, written whole.
    records: the prompt records (`dataset.prompt_records`), in order.
    result: their decoding.
  """
  lines = []
  for r, completion, n, tpf in zip(
      records, result.texts, result.num_forwards, result.tokens_per_forward
  ):
    row = {
        "prompt": r["messages"][-1]["content"],
        "answer": r["answer"],
        "completion": completion,
        "correct": scoring.exact_match(completion, r["answer"]),
        "task": r["task"],
        "num_forwards": int(n),
        "tokens_per_forward": round(float(tpf), 4),
    }
    lines.append(json.dumps(row) + "\n")
  files.write_text(path, "".join(lines))


def summarize(
    records: Sequence[dict[str, Any]],
    result: prompt_batches.DecodeResult,
    settings: GenerateSettings,
    block_size: int,
) -> tuple[dict[str, float], str]:
  """The summary figures and the text that reports them.

  Args:
    records: the prompt records, in order.
    result: their decoding.
    settings: how they were decoded.
    block_size: the checkpoint's.

  Returns:
    `({"exact_match", "tokens_per_forward", "tokens_per_s"}` and
    `"max_replay_error"` when replay was verified`, text)`.
  """
  scores = scoring.score_by_task(
      [r["task"] for r in records], result.texts, [r["answer"] for r in records]
  )
  summary = {
      "exact_match": scores["all"],
      "tokens_per_forward": float(np.mean(result.tokens_per_forward)),
      "tokens_per_s": float(
          result.num_tokens.sum() / max(result.seconds, 1e-9)
      ),
  }
  decode = settings.decode
  lines = [
      f"generate: {len(records)} prompts, block size {block_size}, rule "
      f"{decode.rule} (threshold {decode.threshold}), temperature "
      f"{decode.temperature}, {'cached' if decode.use_cache else 'cache-free'}"
  ]
  lines += [f"  exact match {k:<8} {v:7.2%}" for k, v in scores.items()]
  lines.append(
      f"  tokens/forward {summary['tokens_per_forward']:.2f}, tokens/s "
      f"{summary['tokens_per_s']:.1f}; completions in {settings.output}"
  )
  if result.max_replay_error is not None:
    summary["max_replay_error"] = result.max_replay_error
    lines.append(
        "  replay: max |replayed - recorded| log-prob "
        f"{result.max_replay_error:.2e}"
    )
  return summary, "\n".join(lines)
