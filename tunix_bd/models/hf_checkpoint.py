# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Reading Hugging Face Qwen3 and Qwen2 checkpoint directories into Tunix.

One code path (`load`; the family is the config's `model_type`) reads
tunix_bd's own exports and downloaded checkpoints: `config.json` plus
`model.safetensors` or shards with an index, in the HF key layout. Tunix's
safetensors loader does not check what it reads (a missing tensor stays
abstract, an extra one is skipped, a file with mixed dtypes is misread by
the "optimized" mode), so everything is validated here from the
safetensors headers before Tunix builds the model.
"""

import dataclasses
import os
from typing import Any, Mapping

import jax
import numpy as np
import safetensors
from tunix.models.qwen2 import params as qwen2_params
from tunix.models.qwen3 import params as qwen3_params

from tunix_bd import files
from tunix_bd.core import families
from tunix_bd.models import bd_formats
from tunix_bd.models import checkpoint_digest

CONFIG_FILE = "config.json"
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
# The Tunix safetensors loader of each family `load` reads.
_TUNIX_LOADERS = {"qwen3": qwen3_params, "qwen2": qwen2_params}


def expected_shapes(config: Any) -> dict[str, tuple[int, ...]]:
  """Every HF tensor name of a Qwen3 or Qwen2 `config`, in file order, with
  its shape."""
  qwen2 = families.family(config) == "qwen2"
  d, v, f = config.embed_dim, config.vocab_size, config.hidden_dim
  q, kv = (
      config.num_heads * config.head_dim,
      config.num_kv_heads * config.head_dim,
  )
  shapes = {"model.embed_tokens.weight": (v, d)}
  for i in range(config.num_layers):
    p = f"model.layers.{i}."
    shapes[p + "input_layernorm.weight"] = (d,)
    for name, rows in (("q", q), ("k", kv), ("v", kv)):
      shapes[f"{p}self_attn.{name}_proj.weight"] = (rows, d)
      if qwen2:  # Qwen2's q/k/v projections have biases.
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
  if not os.path.isdir(checkpoint_dir):
    raise ValueError(f"Checkpoint directory {checkpoint_dir} does not exist.")
  path = os.path.join(checkpoint_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    raise ValueError(
        f"{checkpoint_dir} is not a Hugging Face checkpoint directory:"
        f" {CONFIG_FILE} not found."
    )
  return files.read_json(path, bd_formats.RECOPY)


def check_positions(
    hf_config: Mapping[str, Any],
    prompt_length: int,
    max_new_tokens: int,
    *,
    what: str,
    model_key: str,
) -> None:
  """Fails closed when a prompt and its completion outrun the model.

  Nothing is checked without `max_position_embeddings` in `hf_config`;
  `what` names the prompt and budget in the error (e.g. "row 3 of p.jsonl
  (2005 tokens) plus decode.max_new_tokens=16"), `model_key` the model's
  config key.
  """
  limit = hf_config.get("max_position_embeddings")
  needed = prompt_length + max_new_tokens
  if isinstance(limit, int) and needed > limit:
    raise ValueError(
        f"{what} need {needed} positions, but {model_key}'s config.json"
        f" declares max_position_embeddings={limit}: shorten the prompts or"
        " the completion budget."
    )


def tensor_headers(checkpoint_dir: str) -> dict[str, tuple[str, Any, str]]:
  """Every stored tensor's file, shape and header dtype, from the headers:
  HF key -> `(file name, shape, dtype)`, the dtype as safetensors names it
  (`"BF16"`, `"F32"`, ...); checked against the index file if there is one."""
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


def _check_weights(checkpoint_dir: str, config: Any) -> bool:
  """Checks the safetensors headers against the parsed `config.json`.

  Returns whether some file mixes tensor dtypes (Tunix's optimized loader
  reads a whole file with the dtype of its first tensor, so it must not be
  used).
  """
  found = tensor_headers(checkpoint_dir)
  file_dtypes = {}
  for name, _, file_dtype in found.values():
    file_dtypes.setdefault(name, set()).add(file_dtype)
  mixed_dtypes = any(len(d) > 1 for d in file_dtypes.values())

  expected = expected_shapes(config)
  if config.use_tied_embedding and "lm_head.weight" in found:
    _check_tied_lm_head(checkpoint_dir, found)
    del found["lm_head.weight"]
  missing = [k for k in expected if k not in found]
  if missing:
    raise ValueError(
        f"Checkpoint {checkpoint_dir} is missing tensor {missing[0]!r}"
        f" ({len(missing)} missing in all) that {CONFIG_FILE} implies."
    )
  unexpected = sorted(set(found) - set(expected))
  if unexpected:
    raise ValueError(
        f"Checkpoint {checkpoint_dir} has unexpected tensor {unexpected[0]!r}"
        f" ({len(unexpected)} unexpected in all) that {CONFIG_FILE} does not"
        " imply."
    )
  for key, shape in expected.items():
    name, file_shape, file_dtype = found[key]
    if file_shape != shape:
      raise ValueError(
          f"Tensor {key!r} in {name} has shape {list(file_shape)}, but"
          f" {CONFIG_FILE} implies {list(shape)}."
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
  """Loads a Hugging Face-layout Qwen3 or Qwen2 checkpoint into Tunix.

  The directory's `model_type` (`qwen3`, `qwen3_moe` or `qwen2`) picks the
  Tunix model; an SDAR or Fast-dLLM v2 directory loads as its layers'
  family (`bd_formats`). `mesh` (axes named by `ModelConfig.shd_config`)
  shards the parameters, one device if None; stored tensors are cast to
  `dtype` (float32 if None); `param_dtype` may differ (float32 master
  weights under bfloat16 compute); `remat` is a `families.REMAT_MODES`
  name. Returns `(model, config)`; everything is checked, naming the field
  or tensor, before the model is built.
  """
  checkpoint_dir = os.fspath(checkpoint_dir)
  config = bd_formats.model_config_from_hf(
      read_config(checkpoint_dir), dtype=dtype, param_dtype=param_dtype
  )
  config = dataclasses.replace(
      config, remat_config=families.remat_config(config, remat)
  )
  mixed_dtypes = _check_weights(checkpoint_dir, config)
  loader = _TUNIX_LOADERS[families.family(config)]
  model = loader.create_model_from_safe_tensors(
      checkpoint_dir,
      config,
      mesh=mesh,
      dtype=config.param_dtype,
      mode="original" if mixed_dtypes else "auto",
  )
  return model, config
