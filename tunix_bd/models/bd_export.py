# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A block-diffusion export: the HF directory plus `block_diffusion.json`.

What SFT, OPD and GRPO write: `export.export_checkpoint`'s directory and,
beside it, the block-diffusion settings with the mask token's string next to
its id and the chat switches the model was trained with
(`chat.SETTINGS_KEY`). With `export.format` `sdar` or `fast_dllm_v2` the
directory is in that format instead (`format_source`, `format_tokenizer`;
docs/formats.md "Export"), which `bd_formats_export` checks beforehand.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Iterable, Mapping

import jax.numpy as jnp

from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.models import bd_formats
from tunix_bd.models import bd_formats_export
from tunix_bd.models import bd_formats_tokenizer
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config
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

  `model` is a trained Tunix Qwen3 or Qwen2 (LoRA merged); the mask token
  becomes `tokenizer`'s `mask_token`; `extra` are provenance entries for
  `block_diffusion.json`; `fmt` and `reference_code` are `export.format`
  and `export.reference_code`. Raises ValueError, before anything is
  written, as `export.export_checkpoint` and `bd_formats_export`'s checks.
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
      bd_formats_tokenizer.STOP_IDS_KEY: stop_ids_record(tokenizer, stop_ids),
  }
  if fmt != bd_formats_export.TUNIX_BD:
    source = format_source(
        fmt,
        model.config,
        source=source,
        tokenizer=tokenizer,
        bd=bd,
        stop_ids=stop_ids,
    )
    tokenizer = format_tokenizer(fmt, tokenizer)
  export.export_checkpoint(
      model,
      tokenizer,
      export_dir,
      source=source,
      dtype=hf_source.check_dtype(dtype, "export.dtype"),
      stop_ids=stop_ids,
  )
  if fmt != bd_formats_export.TUNIX_BD:
    write_legacy_tokenizer_config(export_dir)
  if reference_code:  # Copies the format's modeling files.
    for name in bd_formats_export.REFERENCE_CODE[fmt].files:
      with open(os.path.join(reference_code, name), "rb") as f:
        files.write_bytes(os.path.join(export_dir, name), f.read())
  bd_config_lib.save_settings(
      bd,
      export_dir,
      extra={**extra, chat.SETTINGS_KEY: chat_options.to_dict()},
      mask_token=mask_token,
  )


# SDAR-4B-Chat's config.json values of the fields that only its training or
# runtime reads (bd_formats.FORMATS[SDAR].dropped and the window fields).
_SDAR_DEFAULTS = {
    "attn_implementation": "flex_attention",
    "fuse_cross_entropy": True,
    "debug": False,
    "ep_size": 1,
    "micro_forward": False,
    "skip_checkpoint": False,
    "use_deepep": False,
    "use_cache": False,
    "use_sliding_window": False,
    "sliding_window": None,
}
_FAST_DLLM_DEFAULTS = {
    "use_cache": True,
    "use_sliding_window": False,
    "sliding_window": None,
}


def _base_config(
    fmt: str,
    model_config: Any,
    source: hf_source.Source | None,
    tokenizer: Any,
) -> dict[str, Any]:
  """What `fmt`'s fields are written over: the source's config (a source in
  another format as its Qwen3/Qwen2 config), or the model's."""
  if source is None:
    return {
        **hf_config.config_to_hf(model_config),
        **hf_source.tokenizer_ids(tokenizer),
    }
  found = bd_formats.detect(source.config)
  if found is None or found.name == fmt:
    return dict(source.config)
  return bd_formats.family_config(source.config, found)


def format_eos(tokenizer: Any) -> int | None:
  """The id a format export lists last as an EOS (SDAR: its EOS and pad).

  The pad, as SDAR-4B-Chat's `<|endoftext|>`; but where the import moved
  the pad off a stop id (`bd_formats.adapt_tokenizer`), that stop id: the
  pad it gave is no token either format's code stops at.
  """
  checkpoint = special_ids.checkpoint_stop_ids(tokenizer)
  return checkpoint[-1] if checkpoint else tokenizer.pad_token_id


def stop_ids_record(tokenizer: Any, stop_ids: Iterable[int]) -> list[int]:
  """The ids tunix_bd stops at, EOS first, as a format export records them
  in `block_diffusion.json` (`bd_formats_tokenizer.STOP_IDS_KEY`)."""
  return list(special_ids.ordered_stop_ids(tokenizer, list(stop_ids)))


def format_source(
    fmt: str,
    model_config: Any,
    *,
    source: hf_source.Source | None,
    tokenizer: Any,
    bd: bd_config_lib.BlockDiffusionConfig,
    stop_ids: Iterable[int] = (),
) -> hf_source.Source:
  """The `hf_source.Source` whose export is `fmt`'s `config.json` and files.

  `export.save_checkpoint` keeps a source's config and generation config,
  checking that the config describes the model; this one is the source's
  (or, without a source, the model's) with the format's fields. `tokenizer`
  is the one before `format_tokenizer`.
  """
  spec = bd_formats.FORMATS[fmt]
  config = _base_config(fmt, model_config, source, tokenizer)
  layers = model_config.num_layers
  pad, last = tokenizer.pad_token_id, format_eos(tokenizer)
  if fmt == bd_formats.SDAR:
    defaults = {**_SDAR_DEFAULTS, "max_window_layers": layers}
    fields = {"block_size": bd.block_size, "mask_token_id": bd.mask_token_id}
    if last is not None:  # SDAR's EOS is its pad; the turn end is in the
      config["eos_token_id"] = last  # generation config (`format_tokenizer`).
      config.setdefault("bos_token_id", last)
  else:
    defaults = {
        **_FAST_DLLM_DEFAULTS,
        "max_window_layers": layers,
        "layer_types": ["full_attention"] * layers,
    }
    fields = {"bd_size": bd.block_size}
  config.update(
      architectures=[spec.architecture],
      model_type=spec.model_type,
      auto_map=dict(spec.auto_map),
      **fields,
  )
  for key, value in defaults.items():
    config.setdefault(key, value)
  # Their transformers (4.5x) reads the weight dtype as `torch_dtype` and
  # the RoPE as `rope_theta` and `rope_scaling`, not transformers 5's
  # `rope_parameters` (it would rotate with its default theta of 10000).
  if "dtype" in config and "torch_dtype" not in config:
    config["torch_dtype"] = config.pop("dtype")
  config.pop("rope_parameters", None)
  config["rope_theta"] = hf_config.config_to_hf(model_config)["rope_theta"]
  config["rope_scaling"] = None  # Tunix implements the default RoPE only.
  generation = dict((source.generation_config if source else None) or {})
  eos_ids = [*stop_ids_record(tokenizer, stop_ids), last]
  generation["eos_token_id"] = list(
      dict.fromkeys(i for i in eos_ids if i is not None)
  )
  if pad is not None:
    generation["pad_token_id"] = pad
  if config.get("bos_token_id") is not None:
    generation["bos_token_id"] = config["bos_token_id"]
  if source is not None:
    tensor_dtypes = source.tensor_dtypes
  else:
    dtype = jnp.dtype(model_config.param_dtype).name
    keys = hf_checkpoint.expected_shapes(model_config)
    tensor_dtypes = dict.fromkeys(keys, dtype)
  return hf_source.Source(config, generation, tensor_dtypes)


def format_tokenizer(fmt: str, tokenizer: Any) -> Any:
  """A copy of the tokenizer as `fmt` ships it (SDAR: EOS = `format_eos`).

  SDAR's tokenizers have `<|endoftext|>` as EOS and pad, and stop at the
  turn end through `generation_config.json`; the import
  (`bd_formats.adapt_tokenizer`) turns the EOS back into that turn end.
  """
  last = format_eos(tokenizer)
  if fmt != bd_formats.SDAR or last is None:
    return tokenizer
  out = copy.deepcopy(tokenizer)
  out.eos_token = tokenizer.convert_ids_to_tokens(last)
  return out


def write_legacy_tokenizer_config(export_dir: str) -> None:
  """Rewrites the export's `tokenizer_config.json` for transformers 4.5x.

  transformers 5 saves the additional special tokens as a list under
  `extra_special_tokens`, a key transformers 4.5x (which both formats' code
  runs on) reads as a dict of named tokens and fails on; both versions read
  the list under `additional_special_tokens`. A tokenizer without a class
  of its own is saved as `TokenizersBackend`, which 4.5x names
  `PreTrainedTokenizerFast`.
  """
  path = os.path.join(export_dir, "tokenizer_config.json")
  if not files.exists(path):
    return
  content = json.loads(files.read_text(path))
  changed = dict(content)
  if isinstance(changed.get("extra_special_tokens"), list):
    listed = changed.pop("extra_special_tokens")
    changed["additional_special_tokens"] = listed
  if changed.get("tokenizer_class") == "TokenizersBackend":
    changed["tokenizer_class"] = "PreTrainedTokenizerFast"
  if changed != content:
    files.write_text(path, json.dumps(changed, indent=2) + "\n")
