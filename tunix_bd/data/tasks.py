# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The embedded default: a family of verifiable digit-string tasks.

Every recipe runs on these with no download. Each example is a single-turn
chat whose answer is exact, so exact match is a faithful score; `trace`,
the realistic one, is a worked execution trace ending with a final answer
line (`scoring.final_answer`). Example `i` of a split is a pure function of
`(seed, split, i)`, for resumable training and reproducible evaluation;
the hash of its prompt picks its split, so train and eval are disjoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Sequence

import numpy as np

from tunix_bd.data.scoring import FINAL_ANSWER_MARK

SPLITS = ("train", "eval")
# Operands of `add` have at most this many digits: carries make longer sums
# far harder for a tiny AR model than sorting or reversing the same digits.
ADD_MAX_DIGITS = 2
# `count` answers hold this many numbers, at least and at most: 199 to 254
# characters, so that a long generation (256 tokens) is real decoding.
COUNT_MIN_TERMS = 40
COUNT_MAX_TERMS = 51
# A `trace` program: this many two-digit inputs, then this many computed
# statements (at least, at most), over values in [0, TRACE_MAX_VALUE]. Each
# statement is one answer line of up to 18 characters: about 120 to 190 in
# all.
TRACE_INPUTS = 3
TRACE_MIN_STEPS = 8
TRACE_MAX_STEPS = 11
TRACE_MAX_VALUE = 999
# One prompt in `_EVAL_BUCKETS` lands in eval; the rest in train.
_EVAL_BUCKETS = 8
# Draws before `TaskMix.example` gives up: a tiny prompt space (one task,
# one-digit operands) can have no prompt at all in one of the splits.
_MAX_DRAWS = 10_000


@dataclasses.dataclass(frozen=True)
class Example:
  """One task instance, rendered as a single-turn conversation."""

  task: str
  prompt: str
  answer: str

  def messages(self) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": self.prompt},
        {"role": "assistant", "content": self.answer},
    ]


def _digits(rng: np.random.Generator, length: int) -> str:
  return "".join(str(d) for d in rng.integers(0, 10, size=length))


def _number(rng: np.random.Generator, num_digits: int) -> int:
  low = 0 if num_digits == 1 else 10 ** (num_digits - 1)
  return int(rng.integers(low, 10**num_digits))


def _on_digits(name: str, answer: Callable[[str], str]):
  """The task `name DIGITS`, answered `answer(DIGITS)`."""

  def generate(rng, min_len, max_len) -> tuple[str, str]:
    s = _digits(rng, int(rng.integers(min_len, max_len + 1)))
    return f"{name} {s}", answer(s)

  return generate


def _add(rng, min_len, max_len) -> tuple[str, str]:
  low, high = min(min_len, ADD_MAX_DIGITS), min(max_len, ADD_MAX_DIGITS)
  a = _number(rng, int(rng.integers(low, high + 1)))
  b = _number(rng, int(rng.integers(low, high + 1)))
  return f"add {a}+{b}", str(a + b)


def _count_answer(start: int) -> str:
  """Numbers from `start` to the last of its hundred, comma-separated."""
  return ",".join(str(n) for n in range(start, start // 100 * 100 + 100))


def _count(rng, min_len, max_len) -> tuple[str, str]:
  # Operand lengths do not apply: the answer's length is the point.
  del min_len, max_len
  terms = int(rng.integers(COUNT_MIN_TERMS, COUNT_MAX_TERMS + 1))
  start = int(rng.integers(10, 100)) * 100 + 100 - terms
  return f"count {start}", _count_answer(start)


def _trace(rng, min_len, max_len) -> tuple[str, str]:
  """A straight-line program and its worked execution trace.

  `trace a=47;b=12;c=85;d=a+c;e=d-b` is answered `d=a+c=47+85=132`,
  `e=d-b=132-12=120`, `#### 120`: each statement updates the previous
  value with an input, so every line needs a lookup and a sum or
  difference. `+` is drawn where the sum stays <= `TRACE_MAX_VALUE` (else
  `-`, which the previous value allows: it is >= every input or `+` was
  possible), so values stay in [0, TRACE_MAX_VALUE].
  """
  del min_len, max_len  # The program's size is the point.
  names = "abcdefghijklmnopqrstuvwxyz"
  steps = int(rng.integers(TRACE_MIN_STEPS, TRACE_MAX_STEPS + 1))
  inputs = [int(rng.integers(10, 100)) for _ in range(TRACE_INPUTS)]
  program = [f"{names[i]}={v}" for i, v in enumerate(inputs)]
  lines = []
  last = int(rng.integers(TRACE_INPUTS))
  value = inputs[last]
  for i in range(TRACE_INPUTS, TRACE_INPUTS + steps):
    k = int(rng.integers(TRACE_INPUTS))
    if value + inputs[k] <= TRACE_MAX_VALUE and (
        value < inputs[k] or rng.random() < 0.5
    ):
      op, result = "+", value + inputs[k]
    else:
      op, result = "-", value - inputs[k]
    statement = f"{names[i]}={names[last]}{op}{names[k]}"
    program.append(statement)
    lines.append(f"{statement}={value}{op}{inputs[k]}={result}")
    last, value = i, result
  lines.append(f"{FINAL_ANSWER_MARK} {value}")
  return f"trace {';'.join(program)}", "\n".join(lines)


_GENERATORS: dict[str, Callable[..., tuple[str, str]]] = {
    "sort": _on_digits("sort", lambda s: "".join(sorted(s))),
    "reverse": _on_digits("reverse", lambda s: s[::-1]),
    "double": _on_digits("double", lambda s: "".join(c + c for c in s)),
    "add": _add,
    "count": _count,
    "trace": _trace,
}
TASK_NAMES = tuple(_GENERATORS)


def check_names(tasks: Sequence[str], key: str) -> None:
  """Fails closed, naming `key`, on no task or one that is not built in."""
  if not tasks:
    raise ValueError(f"{key} is empty; choose from {TASK_NAMES}.")
  unknown = [t for t in tasks if t not in _GENERATORS]
  if unknown:
    raise ValueError(
        f"{key} has unknown task(s) {unknown}; choose from {TASK_NAMES}."
    )


# Opt-in: `add` (carries take a tiny AR model far longer to learn), `trace`
# (its long answers need a realistic model: `quickstart.py:realistic`) and
# `count` (its long answers benchmark long generation, and would make every
# training row that long).
DEFAULT_TASKS = ("sort", "reverse", "double")


@dataclasses.dataclass(frozen=True)
class TaskMix:
  """The `tasks` to draw from (uniformly), their operands' `min_len` and
  `max_len` in digits (`add`'s clipped to `ADD_MAX_DIGITS`), and the `seed`
  that with `(split, index)` fixes an example."""

  tasks: Sequence[str] = DEFAULT_TASKS
  min_len: int = 1
  max_len: int = 6
  seed: int = 0

  def __post_init__(self):
    check_names(self.tasks, "data.tasks")
    if not 1 <= self.min_len <= self.max_len:
      raise ValueError(
          "data.min_len and data.max_len must satisfy 1 <= min_len <= "
          f"max_len, got min_len={self.min_len}, max_len={self.max_len}."
      )

  def example(self, split: str, index: int) -> Example:
    """Returns example `index` of `split`, deterministically."""
    if split not in SPLITS:
      raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")
    if index < 0:
      raise ValueError(f"index must be >= 0, got {index}.")
    rng = np.random.default_rng([self.seed, SPLITS.index(split), index])
    # Rejection sampling keeps the splits disjoint; a draw lands in eval with
    # probability 1 / _EVAL_BUCKETS, so this loop is short.
    for _ in range(_MAX_DRAWS):
      task = self.tasks[int(rng.integers(len(self.tasks)))]
      prompt, answer = _GENERATORS[task](rng, self.min_len, self.max_len)
      if split_of(prompt) == split:
        return Example(task=task, prompt=prompt, answer=answer)
    raise ValueError(
        f"no {split} example in {_MAX_DRAWS} draws: data.tasks="
        f"{tuple(self.tasks)}, data.min_len={self.min_len} and "
        f"data.max_len={self.max_len} allow too few distinct prompts; "
        "raise data.max_len or add tasks."
    )

  def examples(self, split: str, num: int, start: int = 0) -> list[Example]:
    return [self.example(split, i) for i in range(start, start + num)]


def split_of(prompt: str) -> str:
  """The split a prompt belongs to (a stable hash, not Python's `hash`)."""
  digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
  bucket = int.from_bytes(digest, "little") % _EVAL_BUCKETS
  return "eval" if bucket == 0 else "train"
