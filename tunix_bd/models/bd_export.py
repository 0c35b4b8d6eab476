# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A block-diffusion export: the HF directory plus `block_diffusion.json`.

What SFT, OPD and GRPO write: `export.export_checkpoint`'s directory (the
source checkpoint's config, generation config and weight dtypes kept) and,
beside it, the block-diffusion settings with the mask token's string next to
its id and the chat template switches the model was trained with
(`chat.SETTINGS_KEY`), which generation, OPD and GRPO render with. The
tokenizer's `mask_token` is the mask token. With `fmt` `sdar` or
`fast_dllm_v2` the directory is in that format instead of the source's
(`bd_formats_export`, `bd_formats_export_files`), optionally with the
format's modeling files.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.models import bd_formats_tokenizer
from tunix_bd.models import bd_formats_export
from tunix_bd.models import bd_formats_export_files
from tunix_bd.models import export
from tunix_bd.models import hf_source
from tunix_bd.models import mask_token as mask_token_lib


def export_block_diffusion(
    model: Any,
    tokenizer: Any,
    export_dir: str,
    *,
    bd: bd_config_lib.BlockDiffusionConfig,
    chat_options: chat.ChatOptions,
    source: hf_source.Source | None,
    dtype: str | None = None,
    stop_ids: Iterable[int] = (),
    extra: Mapping[str, Any] | None = None,
    fmt: str = bd_formats_export.TUNIX_BD,
    reference_code: str = "",
) -> None:
  """Writes a block-diffusion export, replacing a previous one.

  Args:
    model: the trained Tunix Qwen3 or Qwen2 (LoRA merged).
    tokenizer: its tokenizer; the mask token becomes its `mask_token`.
    export_dir: the directory (or URL) to write.
    bd: the model's block-diffusion settings.
    chat_options: the chat template switches it was trained with.
    source: the checkpoint it was loaded from (`hf_source.read`), or None.
    dtype: `export.dtype`; None or "" keeps the source's.
    stop_ids: further ids that end generation.
    extra: provenance entries for `block_diffusion.json`.
    fmt: `export.format`, one of `bd_formats_export.FORMATS`.
    reference_code: `export.reference_code`: a directory holding the
      format's modeling files to copy into the export, or "".

  Raises:
    ValueError: as `export.export_checkpoint`, and as
      `bd_formats_export.check_exportable` and `check_reference_code`,
      before anything is written.
  """
  mask_token = mask_token_lib.register_mask_token(tokenizer, bd.mask_token_id)
  bd_formats_export.check_exportable(
      fmt,
      alignment=bd.alignment,
      block_size=bd.block_size,
      model_config=model.config,
      mask_token=mask_token,
  )
  bd_formats_export.check_reference_code(fmt, reference_code)
  # What tunix_bd stops at, which a format's generation config cannot tell
  # from the pad it lists as an EOS (`bd_formats.adapt_tokenizer`).
  extra = {
      **dict(extra or {}),
      bd_formats_tokenizer.STOP_IDS_KEY: (
          bd_formats_export_files.stop_ids_record(tokenizer, stop_ids)
      ),
  }
  if fmt != bd_formats_export.TUNIX_BD:
    source = bd_formats_export_files.format_source(
        fmt,
        model.config,
        source=source,
        tokenizer=tokenizer,
        bd=bd,
        stop_ids=stop_ids,
    )
    tokenizer = bd_formats_export_files.format_tokenizer(fmt, tokenizer)
  export.export_checkpoint(
      model,
      tokenizer,
      export_dir,
      source=source,
      dtype=hf_source.check_dtype(dtype, "export.dtype"),
      stop_ids=stop_ids,
  )
  if fmt != bd_formats_export.TUNIX_BD:
    bd_formats_export_files.write_legacy_tokenizer_config(export_dir)
  if reference_code:
    bd_formats_export_files.copy_reference_code(fmt, reference_code, export_dir)
  bd_config_lib.save_settings(
      bd,
      export_dir,
      extra={**extra, chat.SETTINGS_KEY: chat_options.to_dict()},
      mask_token=mask_token,
  )
