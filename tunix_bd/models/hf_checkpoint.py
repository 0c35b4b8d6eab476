# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face Qwen3 checkpoint directories to and from Tunix Qwen3 models.

A checkpoint directory holds `config.json` plus `model.safetensors` (or shards
`model-0000i-of-0000n.safetensors` and `model.safetensors.index.json`) in the
Hugging Face key layout, so tunix_bd's own exports and a downloaded Qwen3 are
read by one code path. Tunix parses no `config.json` and its safetensors
loader does not check what it reads (a missing tensor stays abstract, an extra
one is skipped, a file with mixed dtypes is misread by the "optimized" mode),
so everything is validated here from the safetensors headers before Tunix
builds the model.
"""

import json
import os
import re
import shutil
import uuid
from typing import Any

from flax import nnx
import jax
from jax.experimental import multihost_utils
import numpy as np
import safetensors
from safetensors import numpy as safetensors_np
from tunix.models.qwen3 import model as qwen3_lib
from tunix.models.qwen3 import params as qwen3_params

from tunix_bd.models import hf_config

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Header dtypes Tunix's loader can read (`safetensors_loader.to_np_dtype`).
_FILE_DTYPES = ("BF16", "F16", "F32", "F64")


def _expected_shapes(
    config: qwen3_lib.ModelConfig,
) -> dict[str, tuple[int, ...]]:
  """Returns every HF tensor name of `config`, in file order, with its shape."""
  d, v, f = config.embed_dim, config.vocab_size, config.hidden_dim
  q, kv = (
      config.num_heads * config.head_dim,
      config.num_kv_heads * config.head_dim,
  )
  shapes = {"model.embed_tokens.weight": (v, d)}
  for i in range(config.num_layers):
    p = f"model.layers.{i}."
    shapes.update({
        p + "input_layernorm.weight": (d,),
        p + "self_attn.q_proj.weight": (q, d),
        p + "self_attn.k_proj.weight": (kv, d),
        p + "self_attn.v_proj.weight": (kv, d),
        p + "self_attn.o_proj.weight": (d, q),
        p + "self_attn.q_norm.weight": (config.head_dim,),
        p + "self_attn.k_norm.weight": (config.head_dim,),
        p + "post_attention_layernorm.weight": (d,),
    })
    if config.num_experts is None:
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


def _read_config(checkpoint_dir: str) -> dict[str, Any]:
  if not os.path.isdir(checkpoint_dir):
    raise ValueError(f"Checkpoint directory {checkpoint_dir} does not exist.")
  path = os.path.join(checkpoint_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    raise ValueError(
        f"{checkpoint_dir} is not a Hugging Face checkpoint directory:"
        f" {CONFIG_FILE} not found."
    )
  with open(path) as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not valid JSON: {e}") from e


def _check_weights(checkpoint_dir: str, config: qwen3_lib.ModelConfig) -> bool:
  """Checks the safetensors headers against `config`, before any loading.

  Args:
    checkpoint_dir: The checkpoint directory.
    config: The config parsed from its `config.json`.

  Returns:
    Whether some file mixes tensor dtypes (Tunix's optimized loader reads a
    whole file with the dtype of its first tensor, so it must not be used).

  Raises:
    ValueError: On no weight files, an index that disagrees with the files, a
      duplicate, missing or unexpected tensor, a shape that `config` does
      not imply, or a dtype Tunix cannot read.
  """
  # Tunix's loader reads every *.safetensors file in the directory.
  files = sorted(
      n for n in os.listdir(checkpoint_dir) if n.endswith(".safetensors")
  )
  if not files:
    raise ValueError(f"No *.safetensors weight files in {checkpoint_dir}.")
  weight_map = None
  index_path = os.path.join(checkpoint_dir, INDEX_FILE)
  if os.path.isfile(index_path):
    with open(index_path) as f:
      weight_map = json.load(f).get("weight_map")
    if not isinstance(weight_map, dict):
      raise ValueError(f"{index_path} has no 'weight_map' dict.")
    if set(weight_map.values()) != set(files):
      raise ValueError(
          f"{index_path} lists files {sorted(set(weight_map.values()))} but"
          f" {checkpoint_dir} holds {files}."
      )
  found = {}  # name -> (file, shape, dtype)
  mixed_dtypes = False
  for name in files:
    with safetensors.safe_open(
        os.path.join(checkpoint_dir, name), framework="numpy"
    ) as f:
      file_dtypes = set()
      for key in f.keys():
        header = f.get_slice(key)
        if key in found:
          raise ValueError(
              f"Tensor {key!r} is in both {found[key][0]} and {name}."
          )
        if weight_map is not None and weight_map.get(key) != name:
          raise ValueError(
              f"Tensor {key!r} is in {name} but {INDEX_FILE} says"
              f" {weight_map.get(key)!r}."
          )
        found[key] = (name, tuple(header.get_shape()), header.get_dtype())
        file_dtypes.add(header.get_dtype())
      mixed_dtypes |= len(file_dtypes) > 1

  expected = _expected_shapes(config)
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
    if file_dtype not in _FILE_DTYPES:
      raise ValueError(
          f"Tensor {key!r} in {name} has dtype {file_dtype}; supported:"
          f" {list(_FILE_DTYPES)}."
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


def load_qwen3(
    checkpoint_dir: str | os.PathLike[str],
    *,
    mesh: jax.sharding.Mesh | None = None,
    dtype: Any = None,
) -> tuple[qwen3_lib.Qwen3, qwen3_lib.ModelConfig]:
  """Loads a Hugging Face-layout Qwen3 checkpoint directory into Tunix.

  Args:
    checkpoint_dir: A local directory with `config.json` and safetensors.
    mesh: Optional mesh (axes named by `ModelConfig.shd_config`) to shard the
      parameters over; one device if None.
    dtype: Compute and parameter dtype (float32, bfloat16 or float16);
      float32 if None. Stored tensors are cast to it.

  Returns:
    The model and its config.

  Raises:
    ValueError: If the directory, `config.json` or the weights are missing,
      the config is unsupported, or a tensor is missing, unexpected or of
      the wrong shape. All checked before the model is built.
  """
  checkpoint_dir = os.fspath(checkpoint_dir)
  config = hf_config.qwen3_config_from_hf(
      _read_config(checkpoint_dir), dtype=dtype
  )
  mixed_dtypes = _check_weights(checkpoint_dir, config)
  model = qwen3_params.create_model_from_safe_tensors(
      checkpoint_dir,
      config,
      mesh=mesh,
      dtype=config.param_dtype,
      mode="original" if mixed_dtypes else "auto",
  )
  return model, config


def _to_host(value: Any) -> np.ndarray:
  if isinstance(value, jax.Array) and not value.is_fully_addressable:
    return np.asarray(multihost_utils.process_allgather(value, tiled=True))
  return np.asarray(jax.device_get(value))


def _merge_in_heads(w: np.ndarray) -> np.ndarray:
  return w.reshape(w.shape[0], -1).T  # [D, N, H] -> [N * H, D]


def _merge_out_heads(w: np.ndarray) -> np.ndarray:
  return w.reshape(-1, w.shape[-1]).T  # [N, H, D] -> [D, N * H]


# Inverse of `qwen3_params._get_key_and_transform_mapping`: Tunix parameter
# path -> (HF key, Tunix layout -> HF [out, in] layout). A key with "{e}"
# names one expert of a stacked [experts, in, out] parameter.
_EXPORT_RULES = (
    (r"embedder\.input_embedding", "model.embed_tokens.weight", None),
    (r"final_norm\.w", "model.norm.weight", None),
    (r"lm_head\.w", "lm_head.weight", np.transpose),
    (
        r"layers\.(\d+)\.attn\.([qkv])_proj\.w",
        r"model.layers.\1.self_attn.\2_proj.weight",
        _merge_in_heads,
    ),
    (
        r"layers\.(\d+)\.attn\.o_proj\.w",
        r"model.layers.\1.self_attn.o_proj.weight",
        _merge_out_heads,
    ),
    (
        r"layers\.(\d+)\.attn\.([qk])_norm\.w",
        r"model.layers.\1.self_attn.\2_norm.weight",
        None,
    ),
    (
        r"layers\.(\d+)\.(input_layernorm|post_attention_layernorm)\.w",
        r"model.layers.\1.\2.weight",
        None,
    ),
    (
        r"layers\.(\d+)\.mlp\.(gate|up|down)_proj\.kernel",
        r"model.layers.\1.mlp.\2_proj.weight",
        np.transpose,
    ),
    (
        r"layers\.(\d+)\.mlp\.router\.kernel",
        r"model.layers.\1.mlp.gate.weight",
        np.transpose,
    ),
    (
        r"layers\.(\d+)\.mlp\.(gate|up|down)_proj",
        r"model.layers.\1.mlp.experts.{e}.\2_proj.weight",
        np.transpose,
    ),
)


def _hf_tensors(model: qwen3_lib.Qwen3) -> dict[str, np.ndarray]:
  """Gathers the model's parameters to host, in the HF layout and order."""
  tensors = {}
  for path, variable in nnx.state(model, nnx.Param).flat_state():
    name = ".".join(str(p) for p in path)
    value = _to_host(variable.get_value())
    for pattern, hf_key, transform in _EXPORT_RULES:
      if re.fullmatch(pattern, name):
        hf_key = re.sub(pattern, hf_key, name)
        if "{e}" in hf_key:
          parts = {hf_key.format(e=e): w for e, w in enumerate(value)}
        else:
          parts = {hf_key: value}
        for key, w in parts.items():
          tensors[key] = np.ascontiguousarray(transform(w) if transform else w)
        break
    else:
      raise ValueError(f"Parameter {name!r} has no Hugging Face Qwen3 key.")
  expected = _expected_shapes(model.config)
  for key, shape in expected.items():
    if key not in tensors or tensors[key].shape != shape:
      got = list(tensors[key].shape) if key in tensors else None
      raise ValueError(
          f"Model parameter for {key!r} has shape {got}, but its config"
          f" implies {list(shape)}."
      )
  return {key: tensors[key] for key in expected}


def _fsync_tree(directory: str) -> None:
  for root, _, names in os.walk(directory):
    for name in names:
      fd = os.open(os.path.join(root, name), os.O_RDONLY)
      try:
        os.fsync(fd)
      finally:
        os.close(fd)
  _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
  fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _write_weights(
    directory: str, tensors: dict[str, np.ndarray], max_shard_bytes: int | None
) -> None:
  """Writes one file, or greedy shards of at most max_shard_bytes + index."""
  shards = [[]]
  size = 0
  for key, value in tensors.items():
    # A tensor larger than the limit gets a shard of its own, as in HF.
    if max_shard_bytes and shards[-1] and size + value.nbytes > max_shard_bytes:
      shards.append([])
      size = 0
    shards[-1].append(key)
    size += value.nbytes
  metadata = {"format": "pt"}  # transformers refuses other formats.
  if len(shards) == 1:
    safetensors_np.save_file(
        tensors, os.path.join(directory, WEIGHTS_FILE), metadata=metadata
    )
    return
  weight_map = {}
  for i, keys in enumerate(shards):
    name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    safetensors_np.save_file(
        {k: tensors[k] for k in keys},
        os.path.join(directory, name),
        metadata=metadata,
    )
    weight_map.update(dict.fromkeys(keys, name))
  index = {
      "metadata": {"total_size": sum(v.nbytes for v in tensors.values())},
      "weight_map": weight_map,
  }
  with open(os.path.join(directory, INDEX_FILE), "w") as f:
    json.dump(index, f, indent=2, sort_keys=True)


def save_qwen3(
    model: qwen3_lib.Qwen3,
    output_dir: str | os.PathLike[str],
    *,
    tokenizer: Any = None,
    hf_config_extra: dict[str, Any] | None = None,
    max_shard_bytes: int | None = None,
) -> None:
  """Exports a Tunix Qwen3 as a Hugging Face checkpoint directory.

  Everything is written into a temporary sibling directory that is renamed
  to `output_dir` only when complete, so a crash never leaves a partial
  export. On multi-host runs every process gathers the parameters and
  process 0 writes.

  Args:
    model: The model; LoRA models are refused (merge the adapters first).
    output_dir: The directory to create; it must not exist or be empty.
    tokenizer: Optional `transformers.PreTrainedTokenizerBase`, saved with
      `save_pretrained` into the same directory.
    hf_config_extra: Extra `config.json` keys (see `qwen3_config_to_hf`).
    max_shard_bytes: If set, weights are split into shards of at most this
      many bytes (a larger tensor gets its own shard) with an index file.

  Raises:
    ValueError: On a non-Qwen3 or LoRA model, a non-empty `output_dir`, an
      invalid tokenizer, `hf_config_extra` or `max_shard_bytes`.
  """
  if not isinstance(model, qwen3_lib.Qwen3):
    raise ValueError(f"model must be a Tunix Qwen3, got {type(model)}.")
  if any(isinstance(v, nnx.LoRAParam) for _, v in nnx.iter_graph(model)):
    raise ValueError(
        "model has LoRA parameters (nnx.LoRAParam); merge them into the base"
        " weights before exporting a Hugging Face checkpoint."
    )
  if max_shard_bytes is not None and (
      isinstance(max_shard_bytes, bool)
      or not isinstance(max_shard_bytes, int)
      or max_shard_bytes <= 0
  ):
    raise ValueError(
        f"max_shard_bytes={max_shard_bytes!r} must be a positive integer."
    )
  if tokenizer is not None:
    import transformers  # pylint: disable=g-import-not-at-top

    if not isinstance(tokenizer, transformers.PreTrainedTokenizerBase):
      raise ValueError(
          "tokenizer must be a transformers PreTrainedTokenizerBase, got"
          f" {type(tokenizer)}."
      )
  output_dir = os.path.abspath(os.fspath(output_dir))
  if os.path.lexists(output_dir) and (
      not os.path.isdir(output_dir) or os.listdir(output_dir)
  ):
    raise ValueError(
        f"output_dir {output_dir} already exists and is not an empty"
        " directory; refusing to overwrite it."
    )
  config_json = hf_config.qwen3_config_to_hf(
      model.config, extra=hf_config_extra
  )
  tensors = _hf_tensors(model)
  dtypes = {v.dtype.name for v in tensors.values()}
  if len(dtypes) == 1:
    config_json["torch_dtype"] = dtypes.pop()  # what the files really hold
  if jax.process_index() != 0:
    return

  parent, base = os.path.split(output_dir)
  os.makedirs(parent, exist_ok=True)
  tmp_dir = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex}")
  os.mkdir(tmp_dir)
  try:
    if tokenizer is not None:
      tokenizer.save_pretrained(tmp_dir)
    with open(os.path.join(tmp_dir, CONFIG_FILE), "w") as f:
      json.dump(config_json, f, indent=2, sort_keys=True)
    _write_weights(tmp_dir, tensors, max_shard_bytes)
    _fsync_tree(tmp_dir)
    # rename(2) atomically replaces an empty directory and fails otherwise.
    os.replace(tmp_dir, output_dir)
  except BaseException:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  _fsync_dir(parent)
