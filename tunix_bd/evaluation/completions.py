# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A prompt set decoded by a converted model: its completions and summary.

The `generate` recipe's output: `completions.jsonl` and the figures it
prints.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from etils import epath
import numpy as np

from tunix_bd import files
from tunix_bd.data import scoring
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as settings_lib

# Under `workdir` when `output` is empty.
COMPLETIONS_FILE = "completions.jsonl"
# Keys of every row, which tell an earlier output from another file.
_ROW_KEYS = frozenset({"prompt", "completion", "num_forwards"})


def check_output(path: str, key: str = "output") -> None:
  """Refuses, naming `key`, to replace a file whose first line is not a
  completions row (a weights file, the prompts file itself, ...)."""
  output = epath.Path(path)
  if not output.exists():
    return
  with output.open("rb") as f:
    first = f.read(1 << 16).split(b"\n", 1)[0]
  try:
    ours = _ROW_KEYS <= json.loads(first).keys()
  except (ValueError, AttributeError):  # Not JSON, or not an object.
    ours = False
  if not ours:
    raise ValueError(
        f"{key}={path!r} exists and is not a completions file written by"
        " generate: remove it or choose another output."
    )


def write_completions(
    path: str,
    records: Sequence[dict[str, Any]],
    result: prompt_batches.DecodeResult,
) -> None:
  """One JSON line per prompt (`dataset.prompt_records`, in decoding order):
  its completion, correctness and cost; `path` is written whole."""
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
    decode: settings_lib.DecodeSettings,
    block_size: int,
    output: str,
) -> tuple[dict[str, float], str]:
  """The summary figures and the text that reports them.

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
  lines = [
      f"generate: {len(records)} prompts, block size {block_size}, rule "
      f"{decode.setting()}, temperature "
      f"{decode.temperature}, {'cached' if decode.use_cache else 'cache-free'}"
  ]
  lines += [f"  exact match {k:<8} {v:7.2%}" for k, v in scores.items()]
  lines.append(
      f"  tokens/forward {summary['tokens_per_forward']:.2f}, tokens/s "
      f"{summary['tokens_per_s']:.1f}; completions in {output}"
  )
  if result.max_replay_error is not None:
    summary["max_replay_error"] = result.max_replay_error
    lines.append(
        "  replay: max |replayed - recorded| log-prob "
        f"{result.max_replay_error:.2e}"
    )
  return summary, "\n".join(lines)
