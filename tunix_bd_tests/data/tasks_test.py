# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.tasks: the embedded verifiable digit tasks."""

import collections
import re

from absl.testing import absltest
from absl.testing import parameterized
from tunix_bd.data import tasks

_UNARY = re.compile(r"(sort|reverse|double) ([0-9]+)")
_ADD = re.compile(r"add ([0-9]+)\+([0-9]+)")
_COUNT = re.compile(r"count ([0-9]{4})")
_STATEMENT = r"[a-z]=[a-z][+-][a-z]"
_TRACE = re.compile(
    rf"trace ((?:[a-z]=[0-9]+;)+{_STATEMENT}(?:;{_STATEMENT})*)"
)


def _run_trace(program: str) -> str:
  """Executes a `trace` program; its worked answer, independently."""
  env, lines, value = {}, [], None
  for statement in program.split(";"):
    name, expression = statement.split("=")
    if expression.isdigit():
      env[name] = int(expression)
      continue
    left, op, right = expression[0], expression[1], expression[2]
    a, b = env[left], env[right]
    value = a + b if op == "+" else a - b
    lines.append(f"{statement}={a}{op}{b}={value}")
    env[name] = value
  return "\n".join(lines + [f"#### {value}"])


def _reference(prompt: str) -> tuple[str, str, list[str]]:
  """Re-derives (task, answer, operands) from a prompt, independently."""
  match = _UNARY.fullmatch(prompt)
  if match:
    name, digits = match.groups()
    if name == "sort":
      answer = "".join(sorted(digits))
    elif name == "reverse":
      answer = digits[::-1]
    else:
      answer = "".join(2 * d for d in digits)
    return name, answer, [digits]
  match = _ADD.fullmatch(prompt)
  if match:
    a, b = match.groups()
    return "add", str(int(a) + int(b)), [a, b]
  match = _TRACE.fullmatch(prompt)
  if match:
    return "trace", _run_trace(match.group(1)), []
  match = _COUNT.fullmatch(prompt)
  if match:
    start = int(match.group(1))
    numbers = []
    while True:  # Up to the last number of the hundred.
      numbers.append(str(start))
      if start % 100 == 99:
        return "count", ",".join(numbers), []
      start += 1
  raise AssertionError(f"unexpected prompt {prompt!r}")


def _solve(prompt: str) -> str:
  """Computes the reference answer of a task prompt.

  Raises:
    ValueError: if the prompt is not one of the embedded tasks.
  """
  name, _, arg = prompt.partition(" ")
  if name in ("sort", "reverse", "double") and arg.isdigit():
    return {
        "sort": "".join(sorted(arg)),
        "reverse": arg[::-1],
        "double": "".join(c + c for c in arg),
    }[name]
  if name == "add":
    a, plus, b = arg.partition("+")
    if plus and a.isdigit() and b.isdigit():
      return str(int(a) + int(b))
  if name == "count" and arg.isdigit():
    return tasks._count_answer(int(arg))
  if name == "trace":
    return _run_trace(arg)
  raise ValueError(f"not an embedded task prompt: {prompt!r}")


class TaskMixTest(parameterized.TestCase):

  def test_same_seed_split_index_gives_same_example(self):
    first = tasks.TaskMix(seed=3).examples("train", 200)
    again = tasks.TaskMix(seed=3).examples("train", 200)
    self.assertEqual(first, again)
    # An example does not depend on which other examples were drawn.
    self.assertEqual(
        tasks.TaskMix(seed=3).examples("train", 20, start=150), first[150:170]
    )
    self.assertEqual(tasks.TaskMix(seed=3).example("train", 199), first[199])

  def test_different_seeds_and_splits_differ(self):
    seed0 = tasks.TaskMix(seed=0).examples("train", 100)
    seed1 = tasks.TaskMix(seed=1).examples("train", 100)
    same = sum(a == b for a, b in zip(seed0, seed1))
    self.assertLess(same, 20)
    eval0 = tasks.TaskMix(seed=0).examples("eval", 100)
    self.assertLess(sum(a == b for a, b in zip(seed0, eval0)), 20)

  def test_train_and_eval_are_disjoint(self):
    mix = tasks.TaskMix(min_len=1, max_len=3)
    train = mix.examples("train", 3000)
    evals = mix.examples("eval", 1000)
    self.assertTrue(all(tasks.split_of(e.prompt) == "train" for e in train))
    self.assertTrue(all(tasks.split_of(e.prompt) == "eval" for e in evals))
    train_prompts = {e.prompt for e in train}
    eval_prompts = {e.prompt for e in evals}
    self.assertEmpty(train_prompts & eval_prompts)
    # Short operands repeat prompts, so the check above is not vacuous.
    self.assertLess(len(train_prompts), len(train))

  @parameterized.parameters("train", "eval")
  def test_answers_equal_independent_reference(self, split):
    mix = tasks.TaskMix(tasks=tasks.TASK_NAMES, seed=5, max_len=8)
    for example in mix.examples(split, 600):
      with self.subTest(prompt=example.prompt):
        name, answer, _ = _reference(example.prompt)
        self.assertEqual(example.task, name)
        self.assertEqual(example.answer, answer)
        self.assertEqual(_solve(example.prompt), answer)
        self.assertEqual(
            example.messages(),
            [
                {"role": "user", "content": example.prompt},
                {"role": "assistant", "content": answer},
            ],
        )

  @parameterized.parameters((1, 1), (2, 4), (6, 6), (1, 9))
  def test_operand_lengths_respect_min_and_max(self, min_len, max_len):
    mix = tasks.TaskMix(
        tasks=tasks.TASK_NAMES, min_len=min_len, max_len=max_len, seed=11
    )
    seen = collections.Counter()
    for example in mix.examples("train", 400):
      _, _, operands = _reference(example.prompt)
      low, high = min_len, max_len
      if example.task == "add":  # Operands are clipped to ADD_MAX_DIGITS.
        low = min(min_len, tasks.ADD_MAX_DIGITS)
        high = min(max_len, tasks.ADD_MAX_DIGITS)
      for operand in operands:
        self.assertBetween(len(operand), low, high)
        if example.task == "add" and len(operand) > 1:
          # Operand lengths count digits, so no leading zero.
          self.assertNotEqual(operand[0], "0", example.prompt)
        if example.task != "add":
          seen[len(operand)] += 1
    self.assertCountEqual(seen, range(min_len, max_len + 1))

  def test_all_tasks_appear(self):
    self.assertCountEqual(
        tasks.TASK_NAMES, ("sort", "reverse", "double", "add", "count", "trace")
    )
    self.assertCountEqual(tasks.DEFAULT_TASKS, ("sort", "reverse", "double"))
    for mix in (tasks.TaskMix(), tasks.TaskMix(tasks=tasks.TASK_NAMES)):
      counts = collections.Counter(e.task for e in mix.examples("train", 400))
      self.assertCountEqual(counts, mix.tasks)
      for name in mix.tasks:
        self.assertGreater(counts[name], 50, counts)

  def test_count_answers_are_long_and_span_the_term_range(self):
    mix = tasks.TaskMix(tasks=("count",), min_len=1, max_len=1)
    examples = mix.examples("train", 400) + mix.examples("eval", 100)
    terms = collections.Counter(e.answer.count(",") + 1 for e in examples)
    self.assertCountEqual(
        terms, range(tasks.COUNT_MIN_TERMS, tasks.COUNT_MAX_TERMS + 1)
    )
    lengths = [len(e.answer) for e in examples]
    self.assertEqual(min(lengths), 5 * tasks.COUNT_MIN_TERMS - 1)
    self.assertEqual(max(lengths), 5 * tasks.COUNT_MAX_TERMS - 1)
    self.assertLess(max(lengths), 256)  # Answer and EOS fit 256 tokens.
    # Hundreds vary, so answers are not a handful of memorisable strings.
    self.assertGreater(len({e.prompt[:8] for e in examples}), 60)

  def test_trace_answers_are_long_worked_and_end_with_their_result(self):
    mix = tasks.TaskMix(tasks=("trace",))
    examples = mix.examples("train", 300) + mix.examples("eval", 100)
    steps = collections.Counter(e.answer.count("\n") for e in examples)
    self.assertCountEqual(
        steps, range(tasks.TRACE_MIN_STEPS, tasks.TRACE_MAX_STEPS + 1)
    )
    lengths = [len(e.answer) for e in examples]
    self.assertBetween(min(lengths), 100, 140)
    self.assertBetween(max(lengths), 170, 200)  # Answer and EOS fit 200.
    for example in examples:
      values = [int(v) for v in re.findall(r"=([0-9]+)$", example.answer, re.M)]
      self.assertTrue(
          all(0 <= v <= tasks.TRACE_MAX_VALUE for v in values), example
      )
      self.assertEqual(example.answer.rsplit("\n", 1)[1], f"#### {values[-1]}")
    # Results vary: the final answer is computed, not a template's.
    self.assertGreater(len({e.answer[-4:] for e in examples}), 100)

  def test_task_subset_draws_only_those_tasks(self):
    mix = tasks.TaskMix(tasks=("add",))
    self.assertEqual({e.task for e in mix.examples("eval", 50)}, {"add"})

  @parameterized.named_parameters(
      ("unknown_task", {"tasks": ("sort", "mul")}, r"data\.tasks.*'mul'"),
      ("empty_tasks", {"tasks": ()}, r"data\.tasks is empty"),
      ("zero_min_len", {"min_len": 0}, r"data\.min_len.*min_len=0"),
      (
          "min_above_max",
          {"min_len": 5, "max_len": 4},
          r"data\.min_len and data\.max_len.*min_len=5, max_len=4",
      ),
  )
  def test_invalid_mix_raises_naming_setting(self, kwargs, regex):
    with self.assertRaisesRegex(ValueError, regex):
      tasks.TaskMix(**kwargs)

  def test_invalid_split_or_index_raises(self):
    mix = tasks.TaskMix()
    with self.assertRaisesRegex(ValueError, "split must be one of"):
      mix.example("test", 0)
    with self.assertRaisesRegex(ValueError, "index must be >= 0, got -1"):
      mix.example("train", -1)

  def test_split_without_any_prompt_raises_instead_of_hanging(self):
    # None of the ten prompts "sort 0".."sort 9" hashes into eval.
    self.assertEqual(
        {tasks.split_of(f"sort {d}") for d in range(10)}, {"train"}
    )
    mix = tasks.TaskMix(tasks=("sort",), min_len=1, max_len=1)
    self.assertEqual(mix.example("train", 0).task, "sort")
    with self.assertRaisesRegex(
        ValueError, r"no eval example.*data\.tasks=\('sort',\)"
    ):
      mix.example("eval", 0)

  @parameterized.parameters(
      "",
      "sort",
      "sort ",
      "sort 12a",
      "mul 2+3",
      "add 1+",
      "add 1+2+3",
      "add +2",
      "reverse -12",
      "count",
      "count -5",
  )
  def test_solve_rejects_non_task_prompts(self, prompt):
    with self.assertRaisesRegex(ValueError, "not an embedded task prompt"):
      _solve(prompt)

  def test_solve_examples(self):
    self.assertEqual(_solve("sort 30210"), "00123")
    self.assertEqual(_solve("reverse 0012"), "2100")
    self.assertEqual(_solve("add 999+1"), "1000")
    self.assertEqual(_solve("add 0+0"), "0")
    self.assertEqual(_solve("count 4797"), "4797,4798,4799")


if __name__ == "__main__":
  absltest.main()
