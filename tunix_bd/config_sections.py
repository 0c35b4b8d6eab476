# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Config sections and presets that have no settings dataclass yet.

Sections with a dataclass are built from it (`config_utils.to_section`), the
one source of their defaults. Imported by `configs/*.py`, so it depends on
`ml_collections` alone.
"""

import ml_collections
from ml_collections import config_dict


def chat_fields() -> dict[str, object]:
  """The `data` fields that set how conversations are rendered.

  Returns:
    `chat_template`, a Jinja file that replaces the tokenizer's template
    (empty: keep it; an export carries the one trained with), and
    `enable_thinking`, passed to the template on every render (Qwen3's
    thinking switch; None passes nothing, leaving the template's default).
    A block-diffusion export records the `enable_thinking` it was trained
    with; generation, OPD and GRPO default to it and refuse another.
  """
  return dict(chat_template="", enable_thinking=config_dict.placeholder(bool))


def prompt_data(num_prompts: int = 256) -> ml_collections.ConfigDict:
  """The `data` section of a recipe that decodes and scores prompts.

  Returns:
    A section with `prompts` (a `{"prompt", "answer"}` JSONL path; empty
    means the embedded tasks' eval split), `tasks`, `min_len`, `max_len`
    and `seed` of the embedded generator, `num_prompts` drawn from it, and
    the `chat_fields` (`tunix_bd.data.dataset.prompt_records` reads it).
  """
  return ml_collections.ConfigDict(
      dict(
          prompts="",
          tasks=("sort", "reverse", "double"),
          min_len=1,
          max_len=6,
          seed=0,
          num_prompts=num_prompts,
          **chat_fields(),
      )
  )


def tiny_model_shape() -> dict[str, int]:
  """`model.scratch` fields that smoke variants shrink: 1 layer, 32 wide."""
  return dict(
      num_layers=1,
      embed_dim=32,
      hidden_dim=64,
      num_heads=2,
      head_dim=16,
      num_kv_heads=1,
  )
