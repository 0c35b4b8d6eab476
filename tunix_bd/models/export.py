# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Writing Tunix Qwen3 and Qwen2 models as Hugging Face checkpoint directories.

An export is the directory `hf_checkpoint` reads (`config.json`,
`generation_config.json`, weights, tokenizer), written to a temporary
sibling and renamed into place, so a crash never leaves half an export.
Also finds the block-diffusion exports under a directory.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shutil
import uuid
from typing import Any, Callable, Iterable

from flax import nnx
import jax
from jax.experimental import multihost_utils
import ml_dtypes
import numpy as np
import safetensors
from safetensors import numpy as safetensors_np

from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.models import bd_formats
from tunix_bd.models import checkpoint_digest
from tunix_bd.models import hf_checkpoint

# The families that have a Hugging Face layout here.
_EXPORTABLE = ("qwen3", "qwen2")
_NUMPY_DTYPES = {"bfloat16": ml_dtypes.bfloat16}


def _to_host(value: Any) -> np.ndarray:
  if isinstance(value, jax.Array) and not value.is_fully_addressable:
    return np.asarray(multihost_utils.process_allgather(value, tiled=True))
  return np.asarray(jax.device_get(value))


def _merge_in_heads(w: np.ndarray) -> np.ndarray:
  return w.reshape(w.shape[0], -1).T  # [D, N, H] -> [N * H, D]


def _merge_out_heads(w: np.ndarray) -> np.ndarray:
  return w.reshape(-1, w.shape[-1]).T  # [N, H, D] -> [D, N * H]


# Inverse of `qwen3_params._get_key_and_transform_mapping` (and Qwen2's, which
# adds the q/k/v biases and lacks q/k norms): Tunix parameter path -> (HF
# key, Tunix layout -> HF [out, in] layout). A layer's parameters are matched
# below `layers.N.` (`model.layers.N.` in HF); a key with "{e}" names one
# expert of a stacked [experts, in, out] parameter.
_EXPORT_RULES = (
    (r"embedder\.input_embedding", "model.embed_tokens.weight", None),
    (r"final_norm\.w", "model.norm.weight", None),
    (r"lm_head\.w", "lm_head.weight", np.transpose),
    (r"attn\.([qkv])_proj\.w", r"self_attn.\1_proj.weight", _merge_in_heads),
    (r"attn\.o_proj\.w", "self_attn.o_proj.weight", _merge_out_heads),
    (r"attn\.([qkv])_bias", r"self_attn.\1_proj.bias", None),
    (r"attn\.([qk])_norm\.w", r"self_attn.\1_norm.weight", None),
    (r"(input_layernorm|post_attention_layernorm)\.w", r"\1.weight", None),
    (r"mlp\.(gate|up|down)_proj\.kernel", r"mlp.\1_proj.weight", np.transpose),
    (r"mlp\.router\.kernel", "mlp.gate.weight", np.transpose),
    (
        r"mlp\.(gate|up|down)_proj",
        r"mlp.experts.{e}.\1_proj.weight",
        np.transpose,
    ),
)


def _hf_tensors(model: Any) -> dict[str, np.ndarray]:
  """Gathers the model's parameters to host, in the HF layout and order."""
  tensors = {}
  for path, variable in nnx.state(model, nnx.Param).flat_state():
    name = ".".join(str(p) for p in path)
    value = _to_host(variable.get_value())
    layer = re.match(r"layers\.\d+\.", name)
    prefix, rest = (
        (f"model.{layer[0]}", name[layer.end() :]) if layer else ("", name)
    )
    for pattern, hf_key, transform in _EXPORT_RULES:
      if re.fullmatch(pattern, rest):
        hf_key = prefix + re.sub(pattern, hf_key, rest)
        if "{e}" in hf_key:
          parts = {hf_key.format(e=e): w for e, w in enumerate(value)}
        else:
          parts = {hf_key: value}
        for key, w in parts.items():
          tensors[key] = np.ascontiguousarray(transform(w) if transform else w)
        break
    else:
      raise ValueError(f"Parameter {name!r} has no Hugging Face key.")
  expected = hf_checkpoint.expected_shapes(model.config)
  for key, shape in expected.items():
    if key not in tensors or tensors[key].shape != shape:
      got = list(tensors[key].shape) if key in tensors else None
      raise ValueError(
          f"Model parameter for {key!r} has shape {got}, but its config"
          f" implies {list(shape)}."
      )
  return {key: tensors[key] for key in expected}


def _fsync(path: str) -> None:
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _fsync_tree(directory: str) -> None:
  for root, _, names in os.walk(directory):
    for name in names:
      _fsync(os.path.join(root, name))
  _fsync(directory)


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
  if len(shards) == 1:
    names = [hf_checkpoint.WEIGHTS_FILE]
  else:
    names = [
        f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        for i in range(len(shards))
    ]
  for name, keys in zip(names, shards):
    safetensors_np.save_file(
        {k: tensors[k] for k in keys},
        os.path.join(directory, name),
        metadata={"format": "pt"},  # transformers refuses other formats.
    )
  if len(shards) == 1:
    return
  index = {
      "metadata": {"total_size": sum(v.nbytes for v in tensors.values())},
      "weight_map": {k: n for n, keys in zip(names, shards) for k in keys},
  }
  with open(os.path.join(directory, hf_checkpoint.INDEX_FILE), "w") as f:
    json.dump(index, f, indent=2, sort_keys=True)


def save_checkpoint(
    model: Any,
    output_dir: str | os.PathLike[str],
    *,
    tokenizer: Any = None,
    source: hf_checkpoint.Source | None = None,
    dtype: str | None = None,
    stop_ids: Iterable[int] = (),
    max_shard_bytes: int | None = None,
    finish: Callable[[str], None] | None = None,
) -> None:
  """Exports a Tunix Qwen3 or Qwen2 to an HF directory; a model with LoRA
  params is refused (merge them first).

  Every process gathers the parameters; process 0 writes into `output_dir`
  (absent or empty). `source` is the checkpoint the model was loaded from
  (`hf_checkpoint.read_source`; None from scratch); `dtype` the weight
  dtype (None: the source's, else the model's); `stop_ids` more EOS ids of
  a sourceless generation config; `max_shard_bytes` shards the weights (a
  larger tensor gets its own) with an index; `finish(directory)` adds files
  before the rename.
  """
  name = families.family(model.config)
  if name not in _EXPORTABLE or not isinstance(
      model, families.MODEL_CLASSES[name]
  ):
    raise ValueError(
        "model must be a Tunix Qwen3 or Qwen2, got"
        f" {type(model).__module__}.{type(model).__name__}."
    )
  if any(isinstance(v, nnx.LoRAParam) for _, v in nnx.iter_graph(model)):
    raise ValueError(
        "model has LoRA parameters (nnx.LoRAParam); merge them into the base"
        " weights before exporting a Hugging Face checkpoint."
    )
  dtype = hf_checkpoint.check_export_dtype(dtype, "dtype")
  output_dir = os.path.abspath(os.fspath(output_dir))
  if os.path.lexists(output_dir) and (
      not os.path.isdir(output_dir) or os.listdir(output_dir)
  ):
    raise ValueError(
        f"output_dir {output_dir} already exists and is not an empty"
        " directory; refusing to overwrite it."
    )
  tensors = _hf_tensors(model)
  dtypes = hf_checkpoint.tensor_dtypes(tensors, source=source, dtype=dtype)
  tensors = {
      key: value.astype(_NUMPY_DTYPES.get(dtypes[key], dtypes[key]))
      for key, value in tensors.items()
  }
  config_json = hf_checkpoint.config_json(
      model.config,
      source=source,
      tokenizer=tokenizer,
      file_dtypes=dtypes.values(),
  )
  generation_config = hf_checkpoint.generation_config_json(
      source, tokenizer, stop_ids
  )
  if jax.process_index() != 0:
    return

  parent, base = os.path.split(output_dir)
  os.makedirs(parent, exist_ok=True)
  tmp_dir = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex}")
  os.mkdir(tmp_dir)
  try:
    if tokenizer is not None:
      tokenizer.save_pretrained(tmp_dir)
    # Plain local writes: the directory is local staging (`files`).
    for name, content in (
        (checkpoint_digest.CONFIG_FILE, config_json),
        (bd_formats.GENERATION_CONFIG_FILE, generation_config),
    ):
      if content is not None:
        with open(os.path.join(tmp_dir, name), "w") as f:
          f.write(json.dumps(content, indent=2, sort_keys=True) + "\n")
    _write_weights(tmp_dir, tensors, max_shard_bytes)
    if finish is not None:
      finish(tmp_dir)
    _fsync_tree(tmp_dir)
    # rename(2) atomically replaces an empty directory and fails otherwise.
    os.replace(tmp_dir, output_dir)
  except BaseException:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  _fsync(parent)


def export_checkpoint(
    model: Any, tokenizer: Any, export_dir: str, **options: Any
) -> None:
  """`save_checkpoint` (`options`) to `export_dir`, replacing an export.

  A URL `export_dir` (`gs://...`) is staged locally and copied object by
  object (a crash can leave a partial copy, which the next export
  replaces). A failed write (a full disk) is a one-line `ValueError`.
  """
  save = functools.partial(
      save_checkpoint, model, tokenizer=tokenizer, **options
  )
  if files.is_url(export_dir):
    if files.is_writer():
      files.remove_tree(export_dir)
    with files.local_staging(export_dir) as staged:
      save(staged)
    return
  previous = export_dir + ".previous"
  kept = ""
  if os.path.exists(export_dir):
    shutil.rmtree(previous, ignore_errors=True)
    os.replace(export_dir, previous)
    kept = f"; the previous export is in {previous!r}"
  try:
    save(export_dir)
  # Disk full, most often: one line, not a traceback. safetensors raises
  # its own error for a failed write.
  except (OSError, safetensors.SafetensorError) as e:
    why = getattr(e, "strerror", None) or str(e).rstrip(".")
    raise ValueError(
        f"writing the export {export_dir!r} failed: {why}{kept}; free space"
        " there, then a relaunch with the same workdir resumes from the last"
        " checkpoint and exports again."
    ) from e
  shutil.rmtree(previous, ignore_errors=True)


def find_block_diffusion_exports(root: str, max_depth: int = 4) -> list[str]:
  """Directories under `root` (at most `max_depth` deep) holding a BD export."""
  found = []
  for depth in range(1, max_depth + 1):
    pattern = os.path.join(root, *["*"] * depth, bd_config_lib.SETTINGS_FILE)
    found += [os.path.dirname(p) for p in glob.glob(pattern)]
  return sorted(found)
