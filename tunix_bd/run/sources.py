# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What a run reads from the model it trains, checked as one, before compute.

OPD's student and GRPO's policy are converted models (or a random one),
opened by `models.converted.open_converted`; here is what needs the run's
`Stage`: the `rollout` section's denoiser config and stop ids, the position
budget, the export it will write (`plan_export`, also SFT's) and the
fingerprint fields, read by `read_converted` into a `ConvertedSources`.
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
from tunix_bd.models import converted
from tunix_bd.models import export_plan
from tunix_bd.models import from_scratch
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
      `generate.denoise.DenoiseConfig`), stopping at the tokenizer's EOS,
      then `rollout.extra_stop_ids`.
    export: the export the run writes of it, checked (`plan_export`).
  """

  tokenizer: Any
  bd: bd_config_lib.BlockDiffusionConfig
  decode: Any
  export: export_plan.ExportPlan

  @property
  def chat_options(self) -> chat.ChatOptions:
    """The chat switches the model was trained with (and the export keeps)."""
    return self.export.chat_options

  def fingerprint_fields(
      self, tokenizer_key: str = "tokenizer"
  ) -> dict[str, Any]:
    """What the run fingerprint takes from the sources: `{tokenizer_key:
    digest, "bd": settings, "stop_ids": [ids]}` (`tokenizer_key`: e.g.
    `tokenizer.student` where a run reads two tokenizers)."""
    return {
        tokenizer_key: fingerprint_lib.tokenizer_digest(self.tokenizer),
        "bd": self.bd.to_dict(),
        "stop_ids": list(self.decode.stop_ids),
    }

  def encode_prompts(
      self, conversations: Any, max_prompt_length: int
  ) -> prompts_lib.PromptSet:
    """Conversations' prompts as the model reads them, each checked
    (`data.prompts.encode_prompts`)."""
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
        stop_ids=self.decode.stop_ids,
    )


def random_tokenizer_and_bd(
    scratch_bd: Any, chat_template: str
) -> tuple[Any, bd_config_lib.BlockDiffusionConfig]:
  """A random converted model's tokenizer and block-diffusion settings: the
  embedded tokenizer with `data.chat_template` (or "") and
  `model.scratch_bd`'s settings on its mask token."""
  tokenizer, bd = mask_token.embedded_tokenizer_and_bd(
      block_size=scratch_bd.block_size,
      alignment=scratch_bd.alignment,
      layout=scratch_bd.layout,
  )
  tokenizer_lib.override_chat_template(tokenizer, chat_template)
  return tokenizer, bd


def plan_export(
    stage: Any,
    key: str,
    tokenizer: Any,
    bd: export_plan.BlockShape,
    *,
    chat_options: chat.ChatOptions,
    mask_token: str | None,
) -> export_plan.ExportPlan:
  """Before compute: `model.<key>`, trained, exports as `export` asks.

  Its HF files are read here, once (a random model has none). `bd`: a
  converted model's settings or SFT's `bd` section; `mask_token` as
  `ExportPlan.check` takes it.
  """
  model = stage.settings.model
  path = None if stage.random_init else getattr(model, key)
  hf_files = None if path is None else hf_checkpoint.read_source(path)
  if hf_files is not None:
    model_config = bd_formats.model_config_from_hf(hf_files.config)
  else:  # A random model of the `model.scratch` shape.
    model_config = from_scratch.qwen3_config(model.scratch, len(tokenizer))
  return export_plan.ExportPlan.check(
      stage.export_dir,
      stage.settings.export,
      bd=bd,
      model_config=model_config,
      mask_token=mask_token,
      chat_options=chat_options,
      source=hf_files,
  )


def read_converted(stage: Any, key: str, rollout: Any) -> ConvertedSources:
  """Before compute: what a run reads from converted model `model.<key>`
  (or a random one), checked: special ids that do not collide, the export
  (`plan_export`), and a prompt plus completion within the model's
  positions. Errors name the key. `rollout` gives the denoiser's config,
  stopping at the tokenizer's EOS and `rollout.extra_stop_ids`.
  """
  model, data = stage.settings.model, stage.settings.data
  if stage.random_init:
    tokenizer, bd = random_tokenizer_and_bd(
        model.scratch_bd, data.chat_template
    )
    chat_options = chat.trained_options(None, data.chat_options)
  else:
    opened = converted.open_converted(
        getattr(model, key),
        chat_template=data.chat_template,
        options=data.chat_options,
        key=f"model.{key}",
    )
    tokenizer, bd = opened.tokenizer, opened.bd
    chat_options = opened.chat_options
  decode = rollout.denoise_config(tokenizer)
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=tokenizer.pad_token_id,
      stop_ids=decode.stop_ids,
  )
  mask_id = bd.mask_token_id  # No string names a row past the tokenizer.
  export = plan_export(
      stage,
      key,
      tokenizer,
      bd,
      chat_options=chat_options,
      mask_token=(
          tokenizer.convert_ids_to_tokens(mask_id)
          if mask_id < len(tokenizer)
          else None
      ),
  )
  if export.source is not None:
    hf_checkpoint.check_positions(
        export.source.config,
        decode.max_prompt_length,
        decode.max_new_tokens,
        what=(
            f"rollout.max_prompt_length={decode.max_prompt_length} plus"
            f" rollout.max_new_tokens={decode.max_new_tokens}"
        ),
        model_key=f"model.{key}",
    )
  return ConvertedSources(tokenizer, bd, decode, export)
