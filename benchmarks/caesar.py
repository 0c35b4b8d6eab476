# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A user's own task, outside the embedded default, written as JSONL files.

The README's "your own task" guide converts a model on this task exactly as
a user converts one on theirs: through JSONL files, never through the
embedded task mix. The task is a Caesar shift of a lowercase word,
`caesar 3 hello` -> `khoor`: every answer letter depends on one prompt
letter and the shift, so a converted model can commit many letters of a
block in one forward once it has learned the rule.

  python -m benchmarks.caesar --out=data/caesar --num_train=2000

writes `train.jsonl` and `eval.jsonl` (`{"messages": [...]}` per line, for
`ar_pretrain.py` and `sft.py`) and `prompts.jsonl` (`{"prompt", "answer"}`
per line: the eval split's prompts, for `generate.py` and `compare.py`).
Splits are disjoint: a (shift, word) pair lands in one split by its hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from typing import Iterator, Sequence

from absl import app
from absl import flags
import numpy as np

MIN_LETTERS, MAX_LETTERS = 3, 8
MAX_SHIFT = 9
SPLITS = ("train", "eval")


def shift_word(word: str, shift: int) -> str:
  """`word` with each lowercase letter moved `shift` places, wrapping."""
  letters = string.ascii_lowercase
  return "".join(letters[(letters.index(c) + shift) % 26] for c in word)


def split_of(prompt: str) -> str:
  """The split a prompt belongs to: about 1 in 8 is eval, by its hash."""
  digest = hashlib.sha256(prompt.encode()).digest()
  return "eval" if digest[0] < 32 else "train"


def pairs(split: str, count: int, seed: int = 0) -> Iterator[tuple[str, str]]:
  """`count` distinct `(prompt, answer)` pairs of `split`, seeded."""
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")
  rng = np.random.default_rng([seed, SPLITS.index(split)])
  seen = set()
  while len(seen) < count:
    length = int(rng.integers(MIN_LETTERS, MAX_LETTERS + 1))
    word = "".join(rng.choice(list(string.ascii_lowercase), length))
    shift = int(rng.integers(1, MAX_SHIFT + 1))
    prompt = f"caesar {shift} {word}"
    if prompt in seen or split_of(prompt) != split:
      continue
    seen.add(prompt)
    yield prompt, shift_word(word, shift)


def _write(path: str, rows: Sequence[dict]) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(row) + "\n" for row in rows)


def write_dataset(
    out: str, num_train: int, num_eval: int, seed: int = 0
) -> dict[str, str]:
  """Writes the three files under `out`; returns their paths by name.

  Raises:
    ValueError: for counts below 1.
  """
  for name, value in (("num_train", num_train), ("num_eval", num_eval)):
    if value < 1:
      raise ValueError(f"{name} must be >= 1, got {value}.")
  os.makedirs(out, exist_ok=True)
  chat = lambda p, a: {
      "messages": [
          {"role": "user", "content": p},
          {"role": "assistant", "content": a},
      ]
  }
  train = list(pairs("train", num_train, seed))
  held_out = list(pairs("eval", num_eval, seed))
  paths = {
      name: os.path.join(out, f"{name}.jsonl")
      for name in ("train", "eval", "prompts")
  }
  _write(paths["train"], [chat(p, a) for p, a in train])
  _write(paths["eval"], [chat(p, a) for p, a in held_out])
  _write(paths["prompts"], [{"prompt": p, "answer": a} for p, a in held_out])
  return paths


_OUT = flags.DEFINE_string("out", "data/caesar", "Directory to write.")
_NUM_TRAIN = flags.DEFINE_integer("num_train", 2000, "Training pairs.")
_NUM_EVAL = flags.DEFINE_integer("num_eval", 256, "Held-out pairs.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the draws.")


def main(argv: Sequence[str]) -> None:
  """Writes the files; a bad flag or `--out` exits with one line."""
  if len(argv) > 1:
    raise SystemExit(f"caesar: error: unexpected arguments {argv[1:]}.")
  try:
    paths = write_dataset(
        _OUT.value, _NUM_TRAIN.value, _NUM_EVAL.value, _SEED.value
    )
  except (OSError, ValueError) as e:
    raise SystemExit(f"caesar: error: {e}") from e
  print(
      f"caesar: {_NUM_TRAIN.value} train and {_NUM_EVAL.value} held-out"
      f" pairs: {', '.join(paths.values())}"
  )


if __name__ == "__main__":
  app.run(main)
