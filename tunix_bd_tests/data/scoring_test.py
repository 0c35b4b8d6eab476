# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.data.scoring, the one completion-vs-answer rule."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.data import scoring
from tunix_bd.rl import rewards


def _char_accuracy_reference(prediction: str, answer: str) -> float:
  """Pads both to one length with distinct fillers and counts equal slots."""
  prediction, answer = prediction.strip(), answer.strip()
  width = max(len(prediction), len(answer))
  if width == 0:
    return 1.0
  a = list(prediction) + [None] * (width - len(prediction))
  b = list(answer) + [object()] * (width - len(answer))
  return float(np.mean([x == y for x, y in zip(a, b)]))


class VisibleAnswerTest(parameterized.TestCase):

  @parameterized.parameters(
      ("123", "123"),
      (" 123\n", "123"),
      # Qwen3 with enable_thinking on: the model writes the (empty) block.
      ("<think>\n\n</think>\n\n123", "123"),
      ("<think>carry the 1</think>123 ", "123"),
      # Cut off while reasoning: no answer yet.
      ("<think>\n\ncarry", ""),
      # Only a leading block is reasoning; later tags are answer text.
      ("12<think></think>3", "12<think></think>3"),
      ("<think></think><think></think>1", "<think></think>1"),
  )
  def test_visible_answer(self, completion, expected):
    self.assertEqual(scoring.visible_answer(completion), expected)


class ExactMatchTest(parameterized.TestCase):

  @parameterized.parameters(
      ("123", "123", True),
      (" 123\n", "123", True),
      ("123", " 123 ", True),
      ("0123", "123", False),
      ("1 23", "123", False),
      ("", "123", False),
      ("<think>\n\n</think>\n\n123", "123", True),
      ("<think>\n\n</think>\n\n124", "123", False),
      ("<think>123", "123", False),
  )
  def test_exact_match(self, completion, answer, expected):
    self.assertEqual(scoring.exact_match(completion, answer), expected)

  def test_the_grpo_reward_applies_the_same_rule(self):
    completions = ["<think>\n\n</think>\n\n7", "7", "<think>7", " 8"]
    answers = np.asarray(["7", "7", "7", "7"])  # As Tunix passes them.
    self.assertEqual(
        rewards.exact_match(["p"] * 4, completions, answer=answers),
        [float(scoring.exact_match(c, "7")) for c in completions],
    )
    self.assertEqual(
        rewards.exact_match(["p"] * 4, completions, answer=answers),
        [1.0, 1.0, 0.0, 0.0],
    )


class CharAccuracyTest(parameterized.TestCase):

  @parameterized.parameters(
      ("123", "123", 1.0),
      (" 123\n", "123", 1.0),
      ("12", "123", 2 / 3),  # Truncated.
      ("1234", "123", 3 / 4),  # Over-generated.
      ("321", "123", 1 / 3),
      ("", "12", 0.0),
      ("", "", 1.0),
      ("<think></think>12", "123", 2 / 3),
  )
  def test_char_accuracy(self, completion, answer, expected):
    self.assertAlmostEqual(scoring.char_accuracy(completion, answer), expected)

  def test_char_accuracy_matches_a_padded_reference(self):
    rng = np.random.default_rng(0)
    for _ in range(300):
      a, b = (
          "".join(rng.choice(list("012"), rng.integers(0, 6))) for _ in "ab"
      )
      self.assertAlmostEqual(
          scoring.char_accuracy(a, b), _char_accuracy_reference(a, b)
      )

  def test_full_credit_exactly_when_exact(self):
    rng = np.random.default_rng(1)
    for _ in range(300):
      a, b = (
          "".join(rng.choice(list("01 "), rng.integers(0, 5))) for _ in "ab"
      )
      self.assertEqual(
          scoring.char_accuracy(a, b) == 1.0, scoring.exact_match(a, b), (a, b)
      )


class FinalAnswerTest(parameterized.TestCase):

  @parameterized.parameters(
      ("d=a+b=1+2=3\n#### 3", "3"),
      ("x\n#### 1\ny\n####  42 \ntrailing", "42"),  # The last mark.
      ("<think>\n#### 9</think>\n#### 7", "7"),  # Reasoning dropped.
      (" 123 ", "123"),  # No mark: the whole visible answer.
      ("d=a+b=1+2=3\n####", ""),  # Cut off after the mark.
  )
  def test_final_answer(self, text, expected):
    self.assertEqual(scoring.final_answer(text), expected)

  def test_final_scores_the_result_where_exact_scores_the_whole(self):
    answers = ["d=a+b=1+2=3\n#### 3", "d=a-b=5-1=4\n#### 4", "12"]
    completions = ["d=a+b=1+2=4\n#### 3", "d=a-b=5-1=4\n#### 5", "12"]
    tasks = ["trace", "trace", "sort"]
    self.assertEqual(
        scoring.score_by_task(tasks, completions, answers),
        {"sort": 1.0, "trace": 0.0, "all": 1 / 3},
    )
    self.assertEqual(
        scoring.score_by_task(tasks, completions, answers, final=True),
        {"sort": 1.0, "trace": 0.5, "all": 2 / 3},
    )


class ScoreByTaskTest(parameterized.TestCase):

  def test_score_by_task(self):
    scores = scoring.score_by_task(
        ["sort", "add", "sort", "reverse", "add", "add"],
        ["12", "5", "x", "21 ", "7", "10"],
        ["12", "5", "34", "21", "8", "9"],
    )
    self.assertEqual(
        scores, {"add": 1 / 3, "reverse": 1.0, "sort": 0.5, "all": 0.5}
    )
    self.assertEqual(list(scores), ["add", "reverse", "sort", "all"])

  def test_score_by_task_puts_all_last_after_late_names(self):
    scores = scoring.score_by_task(["zeta", "alpha"], ["1", "2"], ["1", "0"])
    self.assertEqual(list(scores), ["alpha", "zeta", "all"])
    self.assertEqual(scores["all"], 0.5)

  @parameterized.parameters(
      (["sort"], ["1", "2"], ["1", "2"]),
      (["sort", "add"], ["1"], ["1", "2"]),
      (["sort", "add"], ["1", "2"], ["1"]),
  )
  def test_score_by_task_rejects_mismatched_lengths(
      self, task_names, completions, answers
  ):
    with self.assertRaisesRegex(ValueError, "must have equal lengths"):
      scoring.score_by_task(task_names, completions, answers)


if __name__ == "__main__":
  absltest.main()
