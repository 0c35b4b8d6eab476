# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""An imported format's tokenizer: the stop ids its decoder uses, a pad.

SDAR's tokenizer has one token as EOS and pad, and its decoder stops at
every EOS id of its generation config; `adapt` gives it its turn end as EOS,
the other ids as further stop ids, and a pad that is none of them.
`bd_formats.adapt_tokenizer` (and so `bd_formats.load_tokenizer`) calls it
for a directory in a format (docs/formats.md).
"""

from __future__ import annotations

import os
from typing import Any

from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import special_ids

GENERATION_CONFIG_FILE = "generation_config.json"
# What fixes a checkpoint's unreadable file.
RECOPY = "copy or download the checkpoint again."
# `block_diffusion.json`'s record of the ids an export in a format stops at.
STOP_IDS_KEY = "stop_ids"
# The pad of an imported tokenizer whose pad is one of its stop ids.
PAD_TOKEN = "<|pad|>"


def _listed_stop_ids(
    directory: str, tokenizer: Any
) -> tuple[list[int], str] | None:
  """The stop ids a format directory lists, and the file listing them.

  `block_diffusion.json`'s `stop_ids` (what tunix_bd stopped at, recorded
  by its export in a format) or else `generation_config.json`'s
  `eos_token_id`; None where neither lists any. Errors name the file.
  """

  def generation_eos_ids(path):
    content = files.read_json(path, RECOPY)
    return content.get("eos_token_id") if isinstance(content, dict) else None

  for name, key, read in (
      (
          bd_config_lib.SETTINGS_FILE,
          STOP_IDS_KEY,
          lambda _: bd_config_lib.load_extra(directory, STOP_IDS_KEY),
      ),
      (GENERATION_CONFIG_FILE, "eos_token_id", generation_eos_ids),
  ):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
      continue
    listed = read(path)
    if listed is None or listed == []:
      continue
    single = isinstance(listed, int) and not isinstance(listed, bool)
    ids = [listed] if single else listed
    valid = isinstance(ids, list) and all(
        isinstance(i, int)
        and not isinstance(i, bool)
        and 0 <= i < len(tokenizer)
        for i in ids
    )
    if not valid:
      raise ValueError(
          f"{path}: {key}={listed!r} must be token ids of the"
          f" checkpoint's tokenizer (ints in [0, {len(tokenizer)}))."
      )
    return list(dict.fromkeys(ids)), path
  return None


def _move_pad_off(
    directory: str, raw: dict[str, Any], tokenizer: Any, stops: list[int]
) -> None:
  """Makes `PAD_TOKEN` the tokenizer's pad, at an id that is no stop id and
  not the mask (`config.json`'s `mask_token_id`, the tokenizer's).

  The token is the tokenizer's own if it has it as an added token, else it
  is added at the first embedding row past the tokenizer (SDAR checkpoints
  carry spare rows, as for the mask token in `mask_token`); without one the
  error names `config.json`'s `vocab_size`.
  """
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


def adapt(
    directory: str, raw: dict[str, Any], tokenizer: Any, *, sdar: bool
) -> None:
  """Gives an imported format's tokenizer the stop ids its decoder uses.

  SDAR's decoder stops at every id of `generation_config.json`'s
  `eos_token_id` (SDAR-4B-Chat: `<|im_end|>`, then `<|endoftext|>`, its
  pad), or of the `stop_ids` an export in a format records in
  `block_diffusion.json`. tunix_bd's EOS becomes the first of them that is
  not the pad and the others the checkpoint's stop ids
  (`special_ids.checkpoint_stop_ids`); a pad among them becomes `PAD_TOKEN`.
  Fast-dLLM v2's decoder stops at its EOS alone, which changes only if it
  is the pad. `tokenizer` is changed in place; ValueErrors name the file.
  See docs/formats.md "Import".
  """
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
