# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one rule that scores a completion against its answer.

Every accuracy figure (evaluation, reports, `generate.py`, GRPO rewards)
reads completions through `visible_answer`: stripped, without a leading
`<think>...</think>` block, which the model writes after Qwen3's prompt
with `data.enable_thinking` on (one that never closes was cut off before
its answer, which then is empty). `final_answer` reads the result of a
worked answer's last `#### RESULT` line (`trace`, GSM8K-style data).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

REASONING_OPEN = "<think>"
REASONING_CLOSE = "</think>"
# Opens the line that states a worked answer's result.
FINAL_ANSWER_MARK = "####"


def visible_answer(completion: str) -> str:
  """The answer a completion gives: stripped, reasoning block dropped."""
  text = completion.strip()
  if text.startswith(REASONING_OPEN):
    end = text.find(REASONING_CLOSE)
    if end < 0:
      return ""
    text = text[end + len(REASONING_CLOSE) :].strip()
  return text


def exact_match(completion: str, answer: str) -> bool:
  """Whether the completion's `visible_answer` is the (stripped) answer."""
  return visible_answer(completion) == answer.strip()


def final_answer(text: str) -> str:
  """The result a completion or answer states: the stripped rest of its last
  `FINAL_ANSWER_MARK` line, or its whole `visible_answer` if it has none."""
  text = visible_answer(text)
  mark = text.rfind(FINAL_ANSWER_MARK)
  if mark < 0:
    return text
  return text[mark + len(FINAL_ANSWER_MARK) :].split("\n", 1)[0].strip()


def final_match(completion: str, answer: str) -> bool:
  """Whether the completion states the answer's result (`final_answer`)."""
  return final_answer(completion) == final_answer(answer)


def states_results(answers: Sequence[str]) -> bool:
  """Whether any answer ends with a result line, so final answers score
  apart from exact match."""
  return any(FINAL_ANSWER_MARK in a for a in answers)


def char_accuracy(completion: str, answer: str) -> float:
  """The share of characters equal position by position between the
  `visible_answer` and the stripped answer, over the longer (two empty
  strings: 1), so 1 exactly when `exact_match`."""
  prediction, answer = visible_answer(completion), answer.strip()
  longer = max(len(prediction), len(answer))
  if not longer:
    return 1.0
  return sum(p == a for p, a in zip(prediction, answer)) / longer


def score_by_task(
    tasks: Sequence[str],
    completions: Sequence[str],
    answers: Sequence[str],
    *,
    final: bool = False,
) -> dict[str, float]:
  """Exact-match accuracy per task, in name order, then overall (`"all"`);
  with `final`, of `final_answer`s. A ValueError for unequal lengths."""
  if not len(tasks) == len(completions) == len(answers):
    raise ValueError(
        "tasks, completions and answers must have equal lengths, got "
        f"{len(tasks)}, {len(completions)}, {len(answers)}."
    )
  hits: dict[str, list[bool]] = {}
  for task, completion, answer in zip(tasks, completions, answers):
    hit = (final_match if final else exact_match)(completion, answer)
    hits.setdefault(task, []).append(hit)
    hits.setdefault("all", []).append(hit)
  order = sorted(hits, key=lambda k: (k == "all", k))
  return {k: float(np.mean(hits[k])) for k in order}
