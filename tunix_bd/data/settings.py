# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The `data` config sections as frozen, checked dataclasses
(`config_utils`): a training recipe's `Data` (SFT's `SftData`, GRPO's
`RlData`), `PromptData` for one that decodes and scores prompts
(`generate.py`, `compare.py`); `Tasks` is what they share.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunix_bd import config_utils
from tunix_bd.data import chat
from tunix_bd.data import tasks as tasks_lib


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tasks:
  """What every `data` section has: the embedded tasks (`tasks.TaskMix`:
  the examples when no file is given) and how examples render.

  Attributes:
    chat_template: a Jinja file that replaces the tokenizer's template
      (empty: keep it; an export carries the one trained with).
    enable_thinking: Qwen3's template switch (None: the template's
      default); generation, OPD and GRPO take an export's and refuse another.
  """

  SECTION: ClassVar[str] = "data"

  tasks: tuple[str, ...] = ("sort", "reverse", "double")
  min_len: int = 1
  max_len: int = 6
  seed: int = 0
  chat_template: str = config_utils.source(config_utils.FILE)
  enable_thinking: bool | None = None

  def __post_init__(self):
    object.__setattr__(self, "tasks", tuple(self.tasks))
    chat.options_from_data(self)

  @property
  def chat_options(self) -> chat.ChatOptions:
    """The template switches every render passes (`enable_thinking`)."""
    return chat.options_from_data(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Data(Tasks):
  """A training recipe's `data`: `train` and `eval` chat JSONL files, or
  (empty) `num_train` and `num_eval` embedded examples; `max_length`
  tokens per row."""

  train: str = config_utils.source(config_utils.FILE)
  eval: str = config_utils.source(config_utils.FILE)
  num_train: int = 20_000
  num_eval: int = 512
  max_length: int = 48

  def __post_init__(self):
    for key in ("num_train", "num_eval", "max_length"):
      config_utils.check_int(f"data.{key}", getattr(self, key), 1)
    super().__post_init__()


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftData(Data):
  """SFT's `data` (and `bench_sft`'s): `packing`, several examples to a row
  of `max_length` tokens, each in whole blocks of its own, kept apart by
  segment ids (`sft.packing`); exact, so on. Batch sizes count its rows."""

  packing: bool = True

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_bool("data.packing", self.packing)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RlData(Data):
  """GRPO's `data`: `prompts`, an RL JSONL (`{"prompt", "answer"}` per
  line) of train prompts; empty: `train` (a chat JSONL) or the embedded
  tasks."""

  prompts: str = config_utils.source(config_utils.FILE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PromptData(Tasks):
  """The `data` of a recipe that decodes and scores prompts: the JSONL
  `prompts`, or (empty) `num_prompts` of the embedded tasks' eval split."""

  prompts: str = config_utils.source(config_utils.FILE)
  num_prompts: int = 256

  def __post_init__(self):
    super().__post_init__()
    # The embedded tasks' keys matter only without prompts.
    if not self.prompts:
      config_utils.check_int("data.num_prompts", self.num_prompts, 1)
      tasks_lib.TaskMix(
          tasks=self.tasks,
          min_len=self.min_len,
          max_len=self.max_len,
          seed=self.seed,
      )
