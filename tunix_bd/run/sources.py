# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What a run reads from the converted model it trains, checked as one.

OPD's student and GRPO's policy are converted models (`sft.py`'s exports,
or a random one): each run reads the same things from it before any
compute, its tokenizer and block-diffusion settings, the denoiser's config
and stop ids the run's `rollout` section gives, the chat switches it was
trained with and the HF files its export keeps. `read_converted` reads
them into a `ConvertedSources`, which derives what the run fingerprint and
the model checks take from them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_formats
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token


@dataclasses.dataclass(frozen=True)
class ConvertedSources:
  """A converted model's sources, as a run reads them.

  Attributes:
    tokenizer: its tokenizer (holding the mask token), with `data`'s chat
      template override.
    bd: its block-diffusion settings.
    decode: the denoiser's config of the run's `rollout` section (a
      `generate.denoise.DenoiseConfig`), stopping at `stop_ids`.
    stop_ids: the tokenizer's EOS, then `rollout.extra_stop_ids`.
    chat_options: the chat switches the model was trained with (prompts are
      rendered with them, the export records them).
    hf_files: the HF files its export keeps; None for a random model.
  """

  tokenizer: Any
  bd: bd_config_lib.BlockDiffusionConfig
  decode: Any
  stop_ids: tuple[int, ...]
  chat_options: chat.ChatOptions
  hf_files: hf_checkpoint.Source | None

  def fingerprint_fields(
      self, tokenizer_key: str = "tokenizer"
  ) -> dict[str, Any]:
    """`{tokenizer_key: digest, "bd": settings, "stop_ids": [ids]}`: what the
    run fingerprint takes from the sources (`tokenizer_key`: e.g.
    `tokenizer.student` where a run reads two tokenizers)."""
    return {
        tokenizer_key: fingerprint_lib.tokenizer_digest(self.tokenizer),
        "bd": self.bd.to_dict(),
        "stop_ids": list(self.stop_ids),
    }

  def encode_prompts(
      self, conversations: Any, max_prompt_length: int
  ) -> prompts_lib.PromptSet:
    """Conversations' prompts as the model reads them, each checked.

    Rendered with the chat switches the model was trained with and encoded
    with its tokenizer (`data.prompts.encode_prompts`).
    """
    return prompts_lib.encode_prompts(
        self.tokenizer, conversations, max_prompt_length, self.chat_options
    )

  def validate_for_model(self, model_config: Any) -> None:
    """Fails closed unless the model's vocabulary holds the mask, pad and
    stop ids."""
    self.bd.validate_for_model(
        model_config,
        pad_id=self.decode.pad_id,
        eos_id=None,
        stop_ids=self.stop_ids,
    )


def random_tokenizer_and_bd(
    scratch_bd: Any, chat_template: str
) -> tuple[Any, bd_config_lib.BlockDiffusionConfig]:
  """A random converted model's tokenizer and block-diffusion settings.

  The embedded tokenizer with `data.chat_template` (a Jinja file, or "" for
  its own), and `model.scratch_bd`'s block size, alignment and layout on
  the tokenizer's mask token.
  """
  tokenizer, bd = mask_token.embedded_tokenizer_and_bd(
      block_size=scratch_bd.block_size,
      alignment=scratch_bd.alignment,
      layout=scratch_bd.layout,
  )
  tokenizer_lib.override_chat_template(tokenizer, chat_template)
  return tokenizer, bd


def read_converted(stage: Any, key: str, rollout: Any) -> ConvertedSources:
  """Before compute: what a run reads from converted model `model.<key>`.

  Its tokenizer (with `data.chat_template`) and block-diffusion settings (a
  random model's: the embedded tokenizer and `model.scratch_bd`),
  the denoiser's config and stop ids of `rollout`, checked: special ids that
  do not collide, `stage.check_export`, and a prompt plus completion within
  `max_position_embeddings`. Errors name the key. The `rollout` section's
  `denoise_config(tokenizer)` stops at the tokenizer's EOS and
  `rollout.extra_stop_ids`.
  """
  model, chat_template = stage.settings.model, stage.settings.data.chat_template
  if stage.random_init:
    tokenizer, bd = random_tokenizer_and_bd(model.scratch_bd, chat_template)
  else:
    path = getattr(model, key)
    tokenizer = bd_formats.load_tokenizer(
        path, chat_template, key=f"model.{key}"
    )
    bd = bd_formats.load_settings(path, f"model.{key}")
  decode = rollout.denoise_config(tokenizer)
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=tokenizer.pad_token_id,
      stop_ids=decode.stop_ids,
  )
  chat_options, hf_files = stage.check_export(key, tokenizer, bd)
  if hf_files is not None:
    hf_checkpoint.check_positions(
        hf_files.config,
        decode.max_prompt_length,
        decode.max_new_tokens,
        what=(
            f"rollout.max_prompt_length={decode.max_prompt_length} plus"
            f" rollout.max_new_tokens={decode.max_new_tokens}"
        ),
        model_key=f"model.{key}",
    )
  return ConvertedSources(
      tokenizer=tokenizer,
      bd=bd,
      decode=decode,
      stop_ids=tuple(decode.stop_ids),
      chat_options=chat_options,
      hf_files=hf_files,
  )
