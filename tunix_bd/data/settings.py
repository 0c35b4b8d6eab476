# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `data` config sections as frozen, checked dataclasses.

`DataSettings` is the section and the one source of its
defaults: configs build it with `config_utils.to_section(DataSettings,
num_eval=256, ...)`, recipes build it back with `config_utils.from_section`,
checked before any compute. Its files enter run fingerprints by content
(`config_utils.source`). SFT's `data` holds `packing` too
(`SFT_DATA_KEYS`), GRPO's `prompts` (`RL_DATA_KEYS`); that of a recipe that decodes and scores a prompt set
(`generate.py`, `compare.py`) `PROMPT_DATA_KEYS`.
"""

from __future__ import annotations

import dataclasses

from tunix_bd import config_utils
from tunix_bd.data import chat
from tunix_bd.data import tasks as tasks_lib


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSettings:
  """The embedded tasks, or a user's chat JSONL files (GRPO: or an RL JSONL).

  Attributes:
    train, eval: JSONL paths; empty means the embedded tasks (a `train` file
      needs an `eval` file).
    tasks, min_len, max_len, seed: the embedded generator's tasks, operand
      lengths and seed.
    num_train, num_eval: examples drawn from it.
    max_length: tokens per row.
    chat_template: a Jinja file that replaces the tokenizer's template
      (empty: keep it; an export carries the one trained with).
    enable_thinking: passed to the template on every render (Qwen3's
      thinking switch; None passes nothing, leaving the template's
      default). A block-diffusion export records the one it was trained
      with; generation, OPD and GRPO default to it and refuse another.
    prompts: GRPO's (`RL_DATA_KEYS`): an RL JSONL (`{"prompt", "answer"}`
      per line) of train prompts; empty: `train` (a chat JSONL) or the
      embedded tasks. A decoding recipe's (`PROMPT_DATA_KEYS`): the prompts
      it decodes and scores; empty: the embedded tasks' eval split.
    num_prompts: a decoding recipe's: eval prompts drawn from the embedded
      tasks (read by `dataset.prompt_records`).
    packing: SFT's (`SFT_DATA_KEYS`): several examples to a row of
      `max_length` tokens, each in whole blocks of its own, kept apart by
      segment ids (`sft.packing`); exact, so on. The batch sizes then count
      packed rows.
  """

  train: str = config_utils.source(config_utils.FILE)
  eval: str = config_utils.source(config_utils.FILE)
  tasks: tuple[str, ...] = ("sort", "reverse", "double")
  min_len: int = 1
  max_len: int = 6
  seed: int = 0
  num_train: int = 20_000
  num_eval: int = 512
  max_length: int = 48
  chat_template: str = config_utils.source(config_utils.FILE)
  enable_thinking: bool | None = None
  prompts: str = config_utils.source(config_utils.FILE)
  num_prompts: int = 256
  packing: bool = True

  # The keys of a training recipe's `data` (`config_utils.section_keys`).
  SECTION_KEYS = (
      "train",
      "eval",
      "tasks",
      "min_len",
      "max_len",
      "seed",
      "num_train",
      "num_eval",
      "max_length",
      "chat_template",
      "enable_thinking",
  )

  def __post_init__(self):
    keys = config_utils.section_keys(self)
    for key in ("num_train", "num_eval", "max_length"):
      if key in keys:
        config_utils.check_int(f"data.{key}", getattr(self, key), 1)
    object.__setattr__(self, "tasks", tuple(self.tasks))
    # A decoding recipe's embedded tasks' keys matter only without prompts.
    if "num_prompts" in keys and not self.prompts:
      config_utils.check_int("data.num_prompts", self.num_prompts, 1)
      tasks_lib.TaskMix(
          tasks=self.tasks,
          min_len=self.min_len,
          max_len=self.max_len,
          seed=self.seed,
      )
    if "packing" in keys and not isinstance(self.packing, bool):
      raise ValueError(f"data.packing must be a bool, got {self.packing!r}.")
    chat.options_from_data(self)

  @property
  def chat_options(self) -> chat.ChatOptions:
    """The template switches every render passes (`enable_thinking`)."""
    return chat.options_from_data(self)


# SFT's `data` keys (and `bench_sft`'s).
SFT_DATA_KEYS = (*DataSettings.SECTION_KEYS, "packing")
# GRPO's `data` keys.
RL_DATA_KEYS = (*DataSettings.SECTION_KEYS, "prompts")

# The `data` keys of a recipe that decodes and scores prompts (`generate.py`,
# `compare.py`): `prompts`, or the embedded tasks' eval split.
PROMPT_DATA_KEYS = (
    "prompts",
    "tasks",
    "min_len",
    "max_len",
    "seed",
    "num_prompts",
    "chat_template",
    "enable_thinking",
)
