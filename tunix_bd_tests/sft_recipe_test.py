# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for the SFT recipe on a user's chat template (`data.chat_template`).

A tiny AR export with the embedded tokenizer is converted with Qwen3's own
chat template and its thinking switch off: the run trains, and its export
carries the template it was trained with.
"""

import json
import os

from absl.testing import absltest
from tunix_bd import plugin
from tunix_bd.cli import config_loading
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import export
from tunix_bd.recipes import sft
from tunix_bd_tests import test_common

_QWEN3_TEMPLATE = os.path.join(
    os.path.dirname(__file__), "testdata", "qwen3_chat", "chat_template.jinja"
)


class SftChatTemplateTest(absltest.TestCase):

  def test_qwen3_template_without_thinking_trains_and_is_exported(self):
    root = self.create_tempdir().full_path
    tokenizer = tokenizer_lib.build_char_tokenizer()
    source = os.path.join(root, "ar")
    export.save_qwen3(
        test_common.tiny_qwen3(vocab_size=len(tokenizer), seed=2),
        source,
        tokenizer=tokenizer,
    )
    config = config_loading.load_config(
        plugin.PLUGIN.config_dir / "sft.py", "tiny"
    )
    config.model.checkpoint = source
    config.workdir = os.path.join(root, "run")
    config.data.update(chat_template=_QWEN3_TEMPLATE, enable_thinking=False)
    config.train.update(max_steps=2, warmup_steps=1)
    sft.run(config)

    with open(_QWEN3_TEMPLATE, encoding="utf-8") as f:
      template = f.read()
    exported = tokenizer_lib.load_tokenizer(
        os.path.join(config.workdir, "export")
    )
    self.assertEqual(exported.chat_template, template)
    # Generation from the export, with the switch, renders the prompt SFT
    # trained on: the empty think block closes it.
    messages = [{"role": "user", "content": "sort 31"}]
    prompt = exported.decode(
        list(
            chat.encode_prompt(
                exported, messages, chat.ChatOptions(enable_thinking=False)
            )
        )
    )
    self.assertEndsWith(
        prompt, "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    # The fingerprint holds the template by content, not by path.
    path = os.path.join(config.workdir, "checkpoints", "fingerprint.json")
    with open(path, encoding="utf-8") as f:
      data = json.load(f)["fields"]["data"]
    self.assertStartsWith(data["chat_template"], "sha256:")
    self.assertIs(data["enable_thinking"], False)


if __name__ == "__main__":
  absltest.main()
