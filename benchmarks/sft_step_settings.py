# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`bench_sft`'s typed sections, each the one source of its defaults.

`SftStepModelSettings` (`model`) and `SftStepSettings` (`bench`), checked
before any compute (its `bd` is `models.sections.BlockSize`);
`benchmarks.sft_step` times the steps they describe.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from tunix_bd import config_utils
from tunix_bd.core import splash_attention
from tunix_bd.models import from_scratch
from tunix_bd.models import precision
from tunix_bd.training import options

VARIANTS = ("ar", "bd_single_canvas", "bd_clean_context")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftStepModelSettings(
    precision.LossPrecision, from_scratch.ScratchModelSettings
):
  """`bench_sft`'s `model`: a random Qwen3's shape, vocabulary, precision.

  The shape's keys (`from_scratch.ScratchModelSettings`), `dtype`, `remat`
  and `logits_chunk` (`precision.LossPrecision`) and:

  Attributes:
    vocab_size: 0: the tokenizer's vocabulary; more: a real model's (e.g.
      Qwen3's 151,936 ids; the ids past the tokenizer's go unused).
    attention: as SFT's `model.attention`: `dense` or `splash`, for the
      block-diffusion steps.
  """

  SECTION: ClassVar[str] = "model"

  vocab_size: int = 0
  attention: str = config_utils.resumable(default=splash_attention.DENSE)

  def __post_init__(self):
    precision.LossPrecision.__post_init__(self)
    from_scratch.ScratchModelSettings.__post_init__(self)
    config_utils.check_int("model.vocab_size", self.vocab_size, 0)
    splash_attention.check_attention(self.attention)

  @property
  def shape(self) -> from_scratch.ScratchModelSettings:
    """The model's shape (its vocabulary aside), checked."""
    return from_scratch.ScratchModelSettings(**{
        f.name: getattr(self, f.name)
        for f in dataclasses.fields(from_scratch.ScratchModelSettings)
    })

  def qwen3_config(self, tokenizer_size: int) -> Any:
    """The Tunix Qwen3 config at this precision; refuses a small vocabulary."""
    if self.vocab_size and self.vocab_size < tokenizer_size:
      raise ValueError(
          f"model.vocab_size={self.vocab_size} is smaller than the"
          f" tokenizer's {tokenizer_size} ids."
      )
    return self.model_config(
        from_scratch.qwen3_config(self.shape, self.vocab_size or tokenizer_size)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftStepSettings:
  """`bench_sft`'s `bench`: what is timed, and how often.

  Attributes:
    batch_size: rows of the one batch every step trains on.
    num_steps: timed interleaved steps of each variant (the median counts).
    warmup_steps: untimed steps first; two, since the first update changes
      the optimizer state's types and recompiles.
    variants: among `VARIANTS`, `ar` always (the ratios are to it).
    optimizer: as the recipes' `train.optimizer` (`options.OPTIMIZERS`).
  """

  batch_size: int = 32
  num_steps: int = 20
  warmup_steps: int = 2
  variants: tuple[str, ...] = VARIANTS
  optimizer: str = "adamw"

  def __post_init__(self):
    config_utils.check_choice(
        "bench.optimizer", self.optimizer, options.OPTIMIZERS
    )
    for key in ("batch_size", "num_steps", "warmup_steps"):
      config_utils.check_int(f"bench.{key}", getattr(self, key), 1)
    object.__setattr__(self, "variants", tuple(self.variants))
    if "ar" not in self.variants or not set(self.variants) <= set(VARIANTS):
      raise ValueError(
          f"bench.variants must include 'ar' and be among {list(VARIANTS)},"
          f" got {list(self.variants)}."
      )
