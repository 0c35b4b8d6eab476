# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The embedded rows and block settings the SFT batching tests share."""

from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib

TOKENIZER = tokenizer_lib.build_char_tokenizer()
EOS = TOKENIZER.eos_token_id
MASK = TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
CONFIG = bd_config.BlockDiffusionConfig(block_size=8, mask_token_id=MASK)
NUM_EXAMPLES = 18  # Not a multiple of the batch size: epochs drop examples.


def data(max_length: int = 48) -> dataset_lib.TokenizedDataset:
  """`NUM_EXAMPLES` embedded train examples, `max_length` tokens wide."""
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=5
  )
  conversations = dataset_lib.embedded_conversations(mix, "train", NUM_EXAMPLES)
  return dataset_lib.tokenize(TOKENIZER, conversations, max_length)
