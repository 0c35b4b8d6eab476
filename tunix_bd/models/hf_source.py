# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What an export keeps of the Hugging Face checkpoint it was trained from.

An export of a model loaded from a checkpoint (its `Source`) is that
checkpoint as transformers would see it, changed only where training changed
the model: docs/design.md "Hugging Face checkpoints in and out" lists the
`config.json` fields that change. A source in SDAR or Fast-dLLM v2 format
keeps its format's `config.json` the same way (`model_type`, `auto_map`,
block size, mask id); `export.format` writes either format from any source
(`bd_export.format_source`). A model without a source (trained from
scratch) exports the config derived from its Tunix `ModelConfig`, plus the
tokenizer's EOS, pad and BOS ids, and a `generation_config.json` with those
ids (the EOS and stop ids as the EOS list) and greedy decoding.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any, Iterable

import jax.numpy as jnp
import transformers

from tunix_bd import files
from tunix_bd.core import special_ids
from tunix_bd.models import bd_formats
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config

GENERATION_CONFIG_FILE = "generation_config.json"
# The weight dtypes `export.dtype` may name.
EXPORT_DTYPES = ("float32", "bfloat16", "float16")
# transformers>=5 and legacy names of the config's weight dtype.
_DTYPE_KEYS = ("dtype", "torch_dtype")


@dataclasses.dataclass(frozen=True)
class Source:
  """The Hugging Face files of the checkpoint a model was loaded from:
  `config.json`, `generation_config.json` (None if absent) and each stored
  tensor's NumPy dtype name, by HF key."""

  config: dict[str, Any]
  generation_config: dict[str, Any] | None
  tensor_dtypes: dict[str, str]


def read(checkpoint_dir: str | os.PathLike[str]) -> Source:
  """Reads what an export keeps of `checkpoint_dir` (headers, not weights)."""
  checkpoint_dir = os.fspath(checkpoint_dir)
  config = hf_checkpoint.read_config(checkpoint_dir)
  generation_config = None
  path = os.path.join(checkpoint_dir, GENERATION_CONFIG_FILE)
  if os.path.isfile(path):
    generation_config = files.read_json(path, bd_formats.RECOPY)
    if not isinstance(generation_config, dict):
      raise ValueError(f"{path} must hold a JSON object.")
  headers = hf_checkpoint.tensor_headers(checkpoint_dir)
  tensor_dtypes = {
      key: hf_checkpoint.FILE_DTYPES.get(file_dtype, file_dtype)
      for key, (_, _, file_dtype) in headers.items()
  }
  return Source(config, generation_config, tensor_dtypes)


def check_dtype(value: Any, key: str = "export.dtype") -> str | None:
  """The weight dtype an export setting asks for; None keeps the source's.
  A ValueError names `key` for anything but "" (or None) and `EXPORT_DTYPES`.
  """
  if value is None or value == "":
    return None
  if value not in EXPORT_DTYPES:
    raise ValueError(
        f"{key}={value!r} must be one of {list(EXPORT_DTYPES)}, or '' for"
        " the source checkpoint's dtype."
    )
  return value


def tensor_dtypes(
    tensors: dict[str, Any], *, source: Source | None, dtype: str | None
) -> dict[str, str]:
  """The dtype each exported tensor is written in, by HF key.

  `dtype` (`check_dtype`'s value) sets one for all; None keeps the source's
  dtype of each tensor (the model's without a source; a tensor the source
  lacks takes the source's most common dtype).
  """
  if dtype is not None:
    return dict.fromkeys(tensors, dtype)
  if source is None:
    return {key: jnp.dtype(value.dtype).name for key, value in tensors.items()}
  common = collections.Counter(source.tensor_dtypes.values()).most_common(1)
  return {key: source.tensor_dtypes.get(key, common[0][0]) for key in tensors}


def tokenizer_ids(tokenizer: Any) -> dict[str, Any]:
  """The tokenizer's BOS, EOS and pad ids that are set, as config keys."""
  ids = {
      "bos_token_id": getattr(tokenizer, "bos_token_id", None),
      "eos_token_id": tokenizer.eos_token_id,
      "pad_token_id": tokenizer.pad_token_id,
  }
  return {k: v for k, v in ids.items() if v is not None}


def config_json(
    model_config: Any,
    *,
    source: Source | None,
    tokenizer: Any,
    file_dtypes: Iterable[str],
) -> dict[str, Any]:
  """The exported `config.json`, for weight files holding `file_dtypes`.

  Its fields: docs/design.md "Hugging Face checkpoints in and out". Raises
  ValueError if the source's config describes another model than
  `model_config` (in any field but `vocab_size`).
  """
  derived = hf_config.config_to_hf(model_config)
  file_dtypes = sorted(set(file_dtypes))
  if source is None:
    out = dict(derived)
    out.update(tokenizer_ids(tokenizer) if tokenizer is not None else {})
    out["dtype"] = file_dtypes[0] if len(file_dtypes) == 1 else "float32"
  else:
    out = dict(source.config)
    out["vocab_size"] = model_config.vocab_size
    out.setdefault("architectures", derived["architectures"])
    if len(file_dtypes) == 1:
      present = [k for k in _DTYPE_KEYS if k in out] or ["dtype"]
      out.update(dict.fromkeys(present, file_dtypes[0]))
    # Fails closed unless `out` parses to the model `derived` describes.
    parsed = hf_config.config_to_hf(bd_formats.model_config_from_hf(out))
    for key, value in derived.items():
      if key != "dtype" and parsed[key] != value:
        raise ValueError(
            f"the source config.json says {key}={parsed[key]!r} but the"
            f" exported model has {value!r}; refusing to export a"
            " config.json that describes another model."
        )
  out.setdefault("transformers_version", transformers.__version__)
  return out


def generation_config_json(
    source: Source | None, tokenizer: Any, stop_ids: Iterable[int] = ()
) -> dict[str, Any] | None:
  """The exported `generation_config.json`, or None to write none.

  The source's own file, as it is (None for a source without one: then
  transformers derives one from `config.json` as it did for the source);
  without a source, the tokenizer's ids with its EOS and `stop_ids`
  (`rollout.extra_stop_ids`) as the EOS list, or None without a tokenizer.
  """
  if source is not None:
    return source.generation_config
  if tokenizer is None:
    return None
  out = tokenizer_ids(tokenizer)
  eos = [
      tokenizer.eos_token_id,
      *special_ids.checkpoint_stop_ids(tokenizer),
      *map(int, stop_ids),
  ]
  eos = list(dict.fromkeys(eos))
  out["eos_token_id"] = eos[0] if len(eos) == 1 else eos
  out["transformers_version"] = transformers.__version__
  return out
