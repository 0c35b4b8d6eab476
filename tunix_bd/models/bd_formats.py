# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Importing SDAR and Fast-dLLM v2 checkpoint directories.

The one place that knows those formats (`FORMATS`): `detect` recognises a
`config.json`, `model_config_from_hf` maps it to the Tunix Qwen3 or Qwen2
config, and `settings` gives the `BlockDiffusionConfig` their code uses, so
such a directory is a block-diffusion checkpoint without
`block_diffusion.json`. Recipes read any block-diffusion checkpoint through
`load_settings`, `load_extra` and `load_tokenizer` (which gives an imported
tokenizer its decoder's stop ids: `adapt_tokenizer`). What is read and
refused: docs/formats.md "Import".
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import special_ids
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import checkpoint_digest
from tunix_bd.models import hf_config
from tunix_bd.models import mask_token as mask_token_lib

SDAR = "sdar"
FAST_DLLM_V2 = "fast_dllm_v2"
GENERATION_CONFIG_FILE = "generation_config.json"
# What fixes a checkpoint's unreadable file.
RECOPY = "copy or download the checkpoint again."
# `block_diffusion.json`'s record of the ids an export in a format stops at.
STOP_IDS_KEY = "stop_ids"
# The pad of an imported tokenizer whose pad is one of its stop ids.
PAD_TOKEN = "<|pad|>"


@dataclasses.dataclass(frozen=True)
class Format:
  """What identifies a format's `config.json` and what it means.

  Attributes:
    family_type: the `model_type` of the layers (`qwen3`, `qwen2`).
    block_field: the field holding the training block size.
    mask_token: the mask token's string where config.json names no id.
    dropped: format fields that do not change the model's math (training
      kernels, attention backends, fields no code reads).
  """

  name: str
  model_type: str
  architecture: str
  auto_map: dict[str, str]
  family_type: str
  block_field: str
  alignment: str
  mask_token: str | None
  dropped: tuple[str, ...]


FORMATS = {
    SDAR: Format(
        name=SDAR,
        model_type="sdar",
        architecture="SDARForCausalLM",
        auto_map={
            "AutoConfig": "configuration_sdar.SDARConfig",
            "AutoModel": "modeling_sdar.SDARModel",
            "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
        },
        family_type="qwen3",
        block_field="block_size",
        alignment=bd_config_lib.SAME_POSITION,
        mask_token=None,
        dropped=(
            "fuse_cross_entropy",
            "attn_implementation",
            "debug",
            "ep_size",
            "micro_forward",
            "skip_checkpoint",
            "use_deepep",
        ),
    ),
    FAST_DLLM_V2: Format(
        name=FAST_DLLM_V2,
        model_type="Fast_dLLM_Qwen",
        architecture="Fast_dLLM_QwenForCausalLM",
        auto_map={
            "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
            "AutoModel": "modeling.Fast_dLLM_QwenModel",
            "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
        },
        family_type="qwen2",
        block_field="bd_size",
        alignment=bd_config_lib.SHIFTED,
        mask_token="|<MASK>|",
        dropped=("conplemenrary_mask",),  # (sic) No code reads it.
    ),
}
_BY_MODEL_TYPE = {f.model_type: f for f in FORMATS.values()}
_BY_ARCHITECTURE = {f.architecture: f for f in FORMATS.values()}


def detect(raw: Any) -> Format | None:
  """The format of a parsed `config.json`, or None for any other config; a
  ValueError where its `model_type` and `architectures` disagree on it."""
  if not isinstance(raw, dict):
    return None
  fmt = _BY_MODEL_TYPE.get(raw.get("model_type"))
  architectures = raw.get("architectures") or []
  named = [_BY_ARCHITECTURE[a] for a in architectures if a in _BY_ARCHITECTURE]
  if fmt is None and not named:
    return None
  if fmt is None or architectures != [fmt.architecture]:
    expected = fmt or named[0]
    raise ValueError(
        f"HF config model_type={raw.get('model_type')!r} with"
        f" architectures={architectures!r} is not a {expected.name} checkpoint"
        f" (model_type {expected.model_type!r}, architectures"
        f" [{expected.architecture!r}])."
    )
  return fmt


def read_dir(directory: str) -> tuple[Format, dict[str, Any]] | None:
  """The format and parsed `config.json` of `directory`, or None if it has
  no `config.json` or one in another format."""
  path = os.path.join(directory, checkpoint_digest.CONFIG_FILE)
  if not os.path.isfile(path):
    return None
  raw = files.read_json(path, RECOPY)
  fmt = detect(raw)
  return None if fmt is None else (fmt, raw)


def family_config(raw: dict[str, Any], fmt: Format) -> dict[str, Any]:
  """The Qwen3 or Qwen2 `config.json` a format's config describes."""
  auto_map = raw.get("auto_map")
  if auto_map is not None and auto_map != fmt.auto_map:
    raise ValueError(
        f"HF config auto_map={auto_map!r} is not {fmt.name}'s modeling code"
        f" ({fmt.auto_map!r}): its math is unknown to tunix_bd."
    )
  out = {
      k: v
      for k, v in raw.items()
      if k not in fmt.dropped + ("auto_map", fmt.block_field, "mask_token_id")
  }
  out["model_type"] = fmt.family_type
  out["architectures"] = [hf_config.ARCHITECTURES[fmt.family_type]]
  return out


def model_config_from_hf(
    raw: Any, *, dtype: Any = None, param_dtype: Any = None
) -> Any:
  """`hf_config.model_config_from_hf` of a parsed Qwen3, Qwen3-MoE, Qwen2,
  Llama, SDAR or Fast-dLLM v2 `config.json`."""
  fmt = detect(raw)
  if fmt is None:
    return hf_config.model_config_from_hf(
        raw, dtype=dtype, param_dtype=param_dtype
    )
  try:
    return hf_config.model_config_from_hf(
        family_config(raw, fmt), dtype=dtype, param_dtype=param_dtype
    )
  except ValueError as e:
    raise ValueError(f"{fmt.name} checkpoint: {e}") from e


def _mask_id(
    directory: str, raw: dict[str, Any], fmt: Format, key: str | None
) -> int:
  """The mask id, checked to be a reserved token inside the vocabulary."""
  tokenizer = tokenizer_lib.load_tokenizer(directory, key=key)
  where = f"{fmt.name} checkpoint {directory}"
  if fmt.mask_token is not None:
    # No id field: the token names it (their code hard-codes its id).
    if fmt.mask_token not in tokenizer.get_added_vocab():
      raise ValueError(
          f"{where}: its tokenizer has no mask token {fmt.mask_token!r}"
          " (config.json has no mask id field, so the token names it)."
      )
    wanted, field = fmt.mask_token, "mask token"
  else:
    wanted, field = raw.get("mask_token_id"), "mask_token_id"
    named = tokenizer.mask_token_id
    if wanted is None:
      if named is None:
        raise ValueError(
            f"{where}: HF config has no mask_token_id and its tokenizer no"
            " mask_token."
        )
      wanted, field = named, "tokenizer mask_token"
    elif named is not None and named != wanted:
      raise ValueError(
          f"{where}: HF config mask_token_id={wanted!r} but its tokenizer's"
          f" mask_token {tokenizer.mask_token!r} is id {named}."
      )
  try:
    return mask_token_lib.resolve_reserved_mask_id(
        tokenizer, wanted, vocab_size=raw.get("vocab_size")
    )
  except ValueError as e:
    raise ValueError(f"{where} ({field}): {e}") from e


def settings(
    directory: str, key: str | None = None
) -> bd_config_lib.BlockDiffusionConfig | None:
  """The block-diffusion settings of an SDAR or Fast-dLLM v2 directory, or
  None in neither format; `key` (`model.checkpoint`) names it in errors."""
  found = read_dir(directory)
  if found is None:
    return None
  fmt, raw = found
  model_config_from_hf(raw)  # Fails closed before the tokenizer is read.
  block_size = raw.get(fmt.block_field)
  if (
      isinstance(block_size, bool)
      or not isinstance(block_size, int)
      or block_size < 1
  ):
    raise ValueError(
        f"{fmt.name} checkpoint: HF config {fmt.block_field}={block_size!r}"
        " must be a positive integer (the training block size)."
    )
  return bd_config_lib.BlockDiffusionConfig(
      block_size=block_size,
      mask_token_id=_mask_id(directory, raw, fmt, key),
      alignment=fmt.alignment,
      layout=bd_config_lib.CLEAN_CONTEXT,
  )


def load_settings(
    directory: str, key: str | None = None
) -> bd_config_lib.BlockDiffusionConfig:
  """A block-diffusion checkpoint's settings: its `block_diffusion.json`, or
  else its format's (`settings`)."""
  if not os.path.isfile(os.path.join(directory, bd_config_lib.SETTINGS_FILE)):
    imported = settings(directory, key)
    if imported is not None:
      return imported
  return bd_config_lib.load_settings(directory, key)


def load_extra(directory: str, key: str) -> Any:
  """`bd_config.load_extra`; None for an imported directory without
  `block_diffusion.json` (it records nothing of ours)."""
  if not os.path.isfile(os.path.join(directory, bd_config_lib.SETTINGS_FILE)):
    load_settings(directory)  # Raises unless the directory is in a format.
    return None
  return bd_config_lib.load_extra(directory, key)


def load_tokenizer(
    directory: str, chat_template: str = "", *, key: str | None = None
) -> Any:
  """`tokenizer.load_tokenizer`, then `adapt_tokenizer` for a directory in a
  format."""
  tokenizer = tokenizer_lib.load_tokenizer(directory, chat_template, key=key)
  found = read_dir(directory)
  if found is not None:
    fmt, raw = found
    adapt_tokenizer(directory, raw, tokenizer, sdar=fmt.name == SDAR)
  return tokenizer


def _listed_stop_ids(
    directory: str, tokenizer: Any
) -> tuple[list[int], str] | None:
  """`(ids, file)`: `block_diffusion.json`'s `stop_ids` (recorded by
  tunix_bd's export in a format), else `generation_config.json`'s
  `eos_token_id`; None where neither lists any."""
  for name, key in (
      (bd_config_lib.SETTINGS_FILE, STOP_IDS_KEY),
      (GENERATION_CONFIG_FILE, "eos_token_id"),
  ):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
      continue
    if key == STOP_IDS_KEY:
      listed = bd_config_lib.load_extra(directory, key)
    else:
      content = files.read_json(path, RECOPY)
      listed = content.get(key) if isinstance(content, dict) else None
    if listed is None or listed == []:
      continue
    ids = listed if isinstance(listed, list) else [listed]
    if not all(
        isinstance(i, int)
        and not isinstance(i, bool)
        and 0 <= i < len(tokenizer)
        for i in ids
    ):
      raise ValueError(
          f"{path}: {key}={listed!r} must be token ids of the"
          f" checkpoint's tokenizer (ints in [0, {len(tokenizer)}))."
      )
    return list(dict.fromkeys(ids)), path
  return None


def _move_pad_off(
    directory: str, raw: dict[str, Any], tokenizer: Any, stops: list[int]
) -> None:
  """Makes `PAD_TOKEN` the tokenizer's pad, at an id that is no stop id nor
  the mask: its own added token, else the first embedding row past it; a
  ValueError where no such id exists (naming config.json's `vocab_size`)."""
  added, rows = tokenizer.get_added_vocab(), raw.get("vocab_size")
  pad_id, why = added.get(PAD_TOKEN, len(tokenizer)), None
  if PAD_TOKEN not in added and PAD_TOKEN in tokenizer.get_vocab():
    why = f"{PAD_TOKEN!r} is ordinary text in its tokenizer"
  elif pad_id in stops or pad_id in (
      raw.get("mask_token_id"),
      tokenizer.mask_token_id,
  ):
    why = f"{PAD_TOKEN!r} (id {pad_id}) is a stop id or the mask"
  elif not isinstance(rows, int) or pad_id >= rows:
    why = (
        f"{PAD_TOKEN!r} would take id {pad_id}, the first embedding row past"
        f" the tokenizer, but config.json has vocab_size={rows!r}"
    )
  if why is not None:
    raise ValueError(
        f"{directory}: its pad {tokenizer.pad_token!r} is one of its stop ids"
        f" {stops} and cannot become {PAD_TOKEN!r}: {why}."
    )
  tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
  if tokenizer.pad_token_id != pad_id:
    raise ValueError(
        f"{directory}: the tokenizer gave its pad {PAD_TOKEN!r} id"
        f" {tokenizer.pad_token_id}, expected {pad_id}."
    )


def adapt_tokenizer(
    directory: str, raw: dict[str, Any], tokenizer: Any, *, sdar: bool
) -> None:
  """Gives an imported format's tokenizer, in place, the stop ids its
  decoder uses (docs/formats.md "Import"): SDAR's listed ids, the first
  non-pad as EOS, the rest as `special_ids.checkpoint_stop_ids`, a pad among
  them moved to `PAD_TOKEN`; Fast-dLLM v2's EOS alone, changed if the pad."""
  pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
  if not sdar and (eos is None or eos != pad):
    return
  listed, path = _listed_stop_ids(directory, tokenizer) or (
      [] if eos is None else [eos],
      os.path.join(directory, GENERATION_CONFIG_FILE),
  )
  first = next((i for i in listed if i != pad), None)
  if first is None:
    raise ValueError(
        f"{directory}: its tokenizer's EOS is its pad"
        f" ({tokenizer.eos_token!r}) and {os.path.basename(path)} names no"
        " other id to stop at."
    )
  # The listed order, but the EOS first; Fast-dLLM v2's EOS alone.
  stops = [first] + [i for i in listed if i != first and sdar]
  if pad in stops:
    _move_pad_off(directory, raw, tokenizer, stops)
  if stops[0] != eos:
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(stops[0])
  setattr(tokenizer, special_ids.CHECKPOINT_STOP_IDS_ATTR, tuple(stops[1:]))
