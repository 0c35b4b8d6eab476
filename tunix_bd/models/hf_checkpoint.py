# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face Qwen3, Qwen2 and Llama checkpoints: loading, what exports keep.

One code path (`load`) reads tunix_bd's exports and downloaded checkpoints:
`config.json` plus `model.safetensors` or shards with an index. Tunix's
safetensors loader checks nothing (a missing tensor stays abstract, an
extra one is skipped, a file of mixed dtypes is misread by its "optimized"
mode), so the headers are validated here before Tunix builds the model.
What an export keeps of its `Source` checkpoint (`config_json`,
`generation_config_json`): docs/design.md "Hugging Face checkpoints in and
out".
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any, Iterable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import safetensors
import transformers
from tunix.models import safetensors_loader
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen2 import params as qwen2_params
from tunix.models.qwen3 import params as qwen3_params

from tunix_bd import compat
from tunix_bd import files
from tunix_bd.core import families
from tunix_bd.core import special_ids
from tunix_bd.models import bd_formats
from tunix_bd.models import checkpoint_digest
from tunix_bd.models import hf_config

WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Header dtypes Tunix's loader can read (`safetensors_loader.to_np_dtype`),
# by their NumPy names.
FILE_DTYPES = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
}
# transformers>=5 and legacy names of the config's weight dtype.
_DTYPE_KEYS = ("dtype", "torch_dtype")
# The Tunix safetensors loader of each family `load` reads.
_TUNIX_LOADERS = {"qwen3": qwen3_params, "qwen2": qwen2_params}


def expected_shapes(config: Any, llama=False) -> dict[str, tuple[int, ...]]:
  """HF tensor name -> shape of a Qwen3 or Qwen2 `config` (of the Llama
  loading as it with `llama`), in file order."""
  qwen2 = families.family(config) == "qwen2"
  biases = qwen2 and not llama
  d, v, f = config.embed_dim, config.vocab_size, config.hidden_dim
  q = config.num_heads * config.head_dim
  kv = config.num_kv_heads * config.head_dim
  shapes = {"model.embed_tokens.weight": (v, d)}
  for i in range(config.num_layers):
    p = f"model.layers.{i}."
    shapes[p + "input_layernorm.weight"] = (d,)
    for name, rows in (("q", q), ("k", kv), ("v", kv)):
      shapes[f"{p}self_attn.{name}_proj.weight"] = (rows, d)
      if biases:  # Qwen2's q/k/v projections have biases.
        shapes[f"{p}self_attn.{name}_proj.bias"] = (rows,)
    shapes[p + "self_attn.o_proj.weight"] = (d, q)
    if not qwen2:  # Qwen3 normalises q and k per head.
      shapes[p + "self_attn.q_norm.weight"] = (config.head_dim,)
      shapes[p + "self_attn.k_norm.weight"] = (config.head_dim,)
    shapes[p + "post_attention_layernorm.weight"] = (d,)
    if getattr(config, "num_experts", None) is None:
      mlps = [p + "mlp."]
    else:
      shapes[p + "mlp.gate.weight"] = (config.num_experts, d)
      mlps = [f"{p}mlp.experts.{e}." for e in range(config.num_experts)]
    for m in mlps:
      shapes[m + "gate_proj.weight"] = (f, d)
      shapes[m + "up_proj.weight"] = (f, d)
      shapes[m + "down_proj.weight"] = (d, f)
  shapes["model.norm.weight"] = (d,)
  if not config.use_tied_embedding:
    shapes["lm_head.weight"] = (v, d)
  return shapes


def read_config(checkpoint_dir: str) -> dict[str, Any]:
  """The parsed `config.json` of a checkpoint directory."""
  path = checkpoint_digest.config_path(checkpoint_dir)
  return files.read_json(path, bd_formats.RECOPY)


def check_positions(
    hf_config: Mapping[str, Any],
    prompt_length: int,
    max_new_tokens: int,
    *,
    what: str,
    model_key: str,
    fix: str = "shorten the prompts or the completion budget",
) -> None:
  """Fails closed when a prompt and its completion outrun the model's
  `max_position_embeddings` (if any); `what` names them (e.g. "row 3 of
  p.jsonl (2005 tokens) plus decode.max_new_tokens=16"), `model_key` the
  model's config key, `fix` what the error tells the user to do."""
  limit = hf_config.get("max_position_embeddings")
  needed = prompt_length + max_new_tokens
  if isinstance(limit, int) and needed > limit:
    raise ValueError(
        f"{what} need {needed} positions, but {model_key}'s config.json"
        f" declares max_position_embeddings={limit}: {fix}."
    )


def tensor_headers(checkpoint_dir: str) -> dict[str, tuple[str, Any, str]]:
  """HF key -> `(file name, shape, header dtype ("BF16", ...))` of every
  stored tensor, checked against the index file if there is one."""
  found = checkpoint_digest.tensor_headers(checkpoint_dir)
  index_path = os.path.join(checkpoint_dir, INDEX_FILE)
  if os.path.isfile(index_path):
    weight_map = files.read_json(index_path, bd_formats.RECOPY).get(
        "weight_map"
    )
    if not isinstance(weight_map, dict):
      raise ValueError(f"{index_path} has no 'weight_map' dict.")
    weight_files = checkpoint_digest.weight_files(checkpoint_dir)
    if set(weight_map.values()) != set(weight_files):
      raise ValueError(
          f"{index_path} lists files {sorted(set(weight_map.values()))} but"
          f" {checkpoint_dir} holds {weight_files}."
      )
    for key, (name, _, _) in found.items():
      if weight_map.get(key) != name:
        raise ValueError(
            f"Tensor {key!r} is in {name} but {INDEX_FILE} says"
            f" {weight_map.get(key)!r}."
        )
  return {
      key: (name, tuple(entry["shape"]), entry["dtype"])
      for key, (name, _, entry) in found.items()
  }


def _check_weights(checkpoint_dir: str, config: Any, llama: bool) -> bool:
  """Checks the headers against `config`; returns whether a file mixes
  dtypes (Tunix's optimized loader reads a file in its first one's)."""
  found = tensor_headers(checkpoint_dir)
  file_dtypes = {(name, dtype) for name, _, dtype in found.values()}
  mixed_dtypes = len(file_dtypes) > len({name for name, _ in file_dtypes})

  expected = expected_shapes(config, llama)
  if config.use_tied_embedding and "lm_head.weight" in found:
    _check_tied_lm_head(checkpoint_dir, found)
    del found["lm_head.weight"]
  missing = [k for k in expected if k not in found]
  if missing:
    raise ValueError(
        f"Checkpoint {checkpoint_dir} is missing tensor {missing[0]!r}"
        f" ({len(missing)} missing in all) that {checkpoint_digest.CONFIG_FILE}"
        " implies."
    )
  unexpected = sorted(set(found) - set(expected))
  if unexpected:
    raise ValueError(
        f"Checkpoint {checkpoint_dir} has unexpected tensor {unexpected[0]!r}"
        f" ({len(unexpected)} unexpected in all) that"
        f" {checkpoint_digest.CONFIG_FILE} does not imply."
    )
  for key, shape in expected.items():
    name, file_shape, file_dtype = found[key]
    if file_shape != shape:
      raise ValueError(
          f"Tensor {key!r} in {name} has shape {list(file_shape)}, but"
          f" {checkpoint_digest.CONFIG_FILE} implies {list(shape)}."
      )
    if file_dtype not in FILE_DTYPES:
      raise ValueError(
          f"Tensor {key!r} in {name} has dtype {file_dtype}; supported:"
          f" {list(FILE_DTYPES)}."
      )
  return mixed_dtypes


def _check_tied_lm_head(checkpoint_dir: str, found: dict[str, Any]) -> None:
  """Accepts a stored lm_head of a tied model only if it is the embedding."""
  tensors = []
  for key in ("model.embed_tokens.weight", "lm_head.weight"):
    if key not in found:
      raise ValueError(f"Checkpoint {checkpoint_dir} is missing {key!r}.")
    path = os.path.join(checkpoint_dir, found[key][0])
    with safetensors.safe_open(path, framework="numpy") as f:
      tensors.append(f.get_tensor(key))
  embed, lm_head = tensors
  if (
      embed.shape != lm_head.shape
      or embed.dtype != lm_head.dtype
      or not np.array_equal(embed.view(np.uint8), lm_head.view(np.uint8))
  ):
    raise ValueError(
        f"Checkpoint {checkpoint_dir} has tie_word_embeddings=true but a"
        " 'lm_head.weight' that differs from 'model.embed_tokens.weight'."
    )


def load(
    checkpoint_dir: str | os.PathLike[str],
    *,
    mesh: jax.sharding.Mesh | None = None,
    dtype: Any = None,
    param_dtype: Any = None,
    remat: str = "none",
) -> tuple[Any, Any]:
  """`(model, config)` of an HF Qwen3, Qwen2, Llama (as Qwen2), SDAR or
  Fast-dLLM v2 directory, all checked before the model is built.

  `mesh` shards the parameters (one device if None); `dtype` is the compute
  dtype (float32 if None), `param_dtype` the one the tensors are loaded and
  kept in (None: `dtype`; float32 master weights under bfloat16 compute);
  `remat` a `families.REMAT_MODES` name.
  """
  checkpoint_dir = os.fspath(checkpoint_dir)
  raw = read_config(checkpoint_dir)
  config = bd_formats.model_config_from_hf(
      raw, dtype=dtype, param_dtype=param_dtype
  )
  config = dataclasses.replace(
      config, remat_config=families.remat_config(config, remat)
  )
  llama = raw.get("model_type") == hf_config.LLAMA
  mode = "original" if _check_weights(checkpoint_dir, config, llama) else "auto"
  options = dict(mesh=mesh, dtype=config.param_dtype, mode=mode)
  if not llama:
    loader = _TUNIX_LOADERS[families.family(config)]
    model = loader.create_model_from_safe_tensors(
        checkpoint_dir, config, **options
    )
    return model, config
  # Tunix's Qwen2 loader, given the biases a Llama file lacks (Tunix would
  # leave them abstract).
  biases = hf_config.llama_biases(config)
  model = safetensors_loader.load_and_create_model(
      checkpoint_dir,
      qwen2_lib.Qwen2,
      config,
      compat.qwen2_key_mapping,
      preprocess_fn=lambda tensors: {**biases, **tensors},
      **options,
  )
  return model, config


@dataclasses.dataclass(frozen=True)
class Source:
  """The HF files of the checkpoint a model was loaded from: `config.json`,
  `generation_config.json` (or None) and each tensor's NumPy dtype name."""

  config: dict[str, Any]
  generation_config: dict[str, Any] | None
  tensor_dtypes: dict[str, str]


def read_source(checkpoint_dir: str | os.PathLike[str]) -> Source:
  """Reads what an export keeps of `checkpoint_dir` (headers, not weights)."""
  checkpoint_dir = os.fspath(checkpoint_dir)
  config = read_config(checkpoint_dir)
  generation_config = None
  path = os.path.join(checkpoint_dir, bd_formats.GENERATION_CONFIG_FILE)
  if os.path.isfile(path):
    generation_config = files.read_json(path, bd_formats.RECOPY)
    if not isinstance(generation_config, dict):
      raise ValueError(f"{path} must hold a JSON object.")
  headers = tensor_headers(checkpoint_dir)
  tensor_dtypes = {
      key: FILE_DTYPES.get(file_dtype, file_dtype)
      for key, (_, _, file_dtype) in headers.items()
  }
  return Source(config, generation_config, tensor_dtypes)


def check_export_dtype(value: Any, key: str = "export.dtype") -> str | None:
  """The weight dtype an export asks for (None, or "": the source's); a
  ValueError naming `key` for another than `hf_config.DTYPES`."""
  if value is None or value == "":
    return None
  if value not in hf_config.DTYPES:
    raise ValueError(
        f"{key}={value!r} must be one of {list(hf_config.DTYPES)}, or '' for"
        " the source checkpoint's dtype."
    )
  return value


def tensor_dtypes(
    tensors: dict[str, Any], *, source: Source | None, dtype: str | None
) -> dict[str, str]:
  """HF key -> the dtype it is exported in: `dtype`, else the source's (its
  most common for a tensor it lacks), else the model's."""
  if dtype is not None:
    return dict.fromkeys(tensors, dtype)
  if source is None:
    return {key: jnp.dtype(value.dtype).name for key, value in tensors.items()}
  common = collections.Counter(source.tensor_dtypes.values()).most_common(1)
  return {key: source.tensor_dtypes.get(key, common[0][0]) for key in tensors}


def tokenizer_ids(tokenizer: Any) -> dict[str, Any]:
  """The tokenizer's BOS, EOS and pad ids that are set, as config keys."""
  names = ("bos_token_id", "eos_token_id", "pad_token_id")
  ids = {name: getattr(tokenizer, name, None) for name in names}
  return {k: v for k, v in ids.items() if v is not None}


def config_json(
    model_config: Any,
    *,
    source: Source | None,
    tokenizer: Any,
    file_dtypes: Iterable[str],
) -> dict[str, Any]:
  """The exported `config.json` of weights in `file_dtypes` (docs/design.md
  "Hugging Face checkpoints in and out"); a ValueError if the source's
  describes another model than `model_config` (but for `vocab_size`)."""
  derived = hf_config.config_to_hf(model_config)
  file_dtypes = sorted(set(file_dtypes))
  if source is None:
    out = dict(derived)
    out.update(tokenizer_ids(tokenizer) if tokenizer is not None else {})
    out["dtype"] = file_dtypes[0] if len(file_dtypes) == 1 else "float32"
  else:
    out = dict(source.config)
    if out.get("model_type") == hf_config.LLAMA:
      out = hf_config.llama_as_qwen2(out)  # What the model runs as.
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
  """The exported `generation_config.json`, or None to write none: the
  source's own (None if it has none: transformers derives one from
  `config.json`, as for the source); without a source, the tokenizer's ids
  with EOS, its checkpoint stop ids, then `stop_ids` as the EOS list (None
  without a tokenizer)."""
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
