# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.distillation.wiring: the OPD run's prompts."""

from absl.testing import absltest
import numpy as np
from tunix_bd import config_files
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import wiring
from tunix_bd.run import sources as sources_lib


class TrainAndEvalPromptsTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.data = config_files.get_config("opd", "smoke").data
    tokenizer = tokenizer_lib.build_char_tokenizer()
    # A template that renders the thinking switch, so that it shows.
    tokenizer.chat_template += "{% if enable_thinking is false %}x{% endif %}"
    self.student = sources_lib.ConvertedSources(
        tokenizer=tokenizer,
        bd=None,  # Prompts need only the tokenizer and the chat switches.
        decode=None,
        stop_ids=(),
        chat_options=chat.ChatOptions(enable_thinking=False),
        hf_files=None,
    )

  def test_both_splits_are_rendered_as_the_student_was_trained(self):
    train, held_out = wiring.train_and_eval_prompts(self.student, self.data, 32)
    conversations = dataset_lib.conversations(self.data)
    for got, split in zip((train, held_out), conversations):
      want = prompts_lib.encode_prompts(
          self.student.tokenizer, split, 32, self.student.chat_options
      )
      np.testing.assert_array_equal(got.tokens, want.tokens)
      np.testing.assert_array_equal(got.lengths, want.lengths)
      self.assertEqual(got.answers, want.answers)
    self.assertLen(held_out, self.data.num_eval)
    # The student's chat switches, not the template's default.
    default = prompts_lib.encode_prompts(
        self.student.tokenizer, conversations[0], 32
    )
    self.assertFalse(np.array_equal(train.tokens, default.tokens))

  def test_a_prompt_longer_than_the_rollout_holds_is_refused(self):
    with self.assertRaisesRegex(ValueError, r"rollout\.max_prompt_length=4"):
      wiring.train_and_eval_prompts(self.student, self.data, 4)


if __name__ == "__main__":
  absltest.main()
