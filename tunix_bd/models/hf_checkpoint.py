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
import jax.numpy as jnp
import numpy as np
import safetensors
from safetensors import numpy as safetensors_np
from tunix.models.qwen3 import model as qwen3_lib
from tunix.models.qwen3 import params as qwen3_params

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

# Tunix's Qwen3 attention calls `apply_rope` without the config's theta, so
# the model rotates with this base whatever `ModelConfig.rope_theta` says
# (google-tunix 0.1.7, and main as of 2026-08). Any other theta is rejected.
TUNIX_ROPE_THETA = 1_000_000

_ARCHITECTURES = {
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
_DTYPES = {
    "float32": jnp.float32,
    "bfloat16": jnp.bfloat16,
    "float16": jnp.float16,
}
# Header dtypes Tunix's loader can read (`safetensors_loader.to_np_dtype`).
_FILE_DTYPES = ("BF16", "F16", "F32", "F64")
_MOE_FIELDS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")


def _field(hf_config: dict[str, Any], key: str) -> Any:
  if hf_config.get(key) is None:
    raise ValueError(f"HF config is missing required field {key!r}.")
  return hf_config[key]


def _positive_int(hf_config: dict[str, Any], key: str) -> int:
  value = _field(hf_config, key)
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f"HF config {key}={value!r} must be a positive integer.")
  return value


def _dtype(name: str, value: Any) -> Any:
  try:
    key = jnp.dtype(value).name
  except TypeError as e:
    raise ValueError(f"{name}={value!r} is not a dtype.") from e
  if key not in _DTYPES:
    raise ValueError(f"{name}={value!r} is not one of {sorted(_DTYPES)}.")
  return _DTYPES[key]


def _rope_theta(hf_config: dict[str, Any]) -> int:
  """Returns the RoPE base after checking that Tunix implements the RoPE."""
  theta = hf_config.get("rope_theta")
  # Legacy `rope_scaling` and transformers>=5 `rope_parameters`.
  for key in ("rope_scaling", "rope_parameters"):
    rope = hf_config.get(key)
    if rope is None:
      continue
    if not isinstance(rope, dict):
      raise ValueError(f"HF config {key}={rope!r} must be a dict or null.")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
      raise ValueError(
          f"HF config {key} has rope_type {rope_type!r}; Tunix Qwen3 only"
          " implements the default RoPE."
      )
    unknown = sorted(set(rope) - {"rope_type", "type", "rope_theta"})
    if unknown:
      raise ValueError(f"HF config {key} has unsupported keys {unknown}.")
    if "rope_theta" in rope:
      if theta is not None and rope["rope_theta"] != theta:
        raise ValueError(
            f"HF config {key}.rope_theta={rope['rope_theta']!r} conflicts"
            f" with rope_theta={theta!r}."
        )
      theta = rope["rope_theta"]
  if theta is None:
    raise ValueError(
        "HF config is missing required field 'rope_theta' (Hugging Face"
        " would default it to 10000)."
    )
  if theta != TUNIX_ROPE_THETA:
    raise ValueError(
        f"HF config rope_theta={theta!r} is not supported: Tunix Qwen3"
        f" always applies RoPE with theta {TUNIX_ROPE_THETA}."
    )
  return TUNIX_ROPE_THETA


# Settings that change the math but Tunix's Qwen3 lacks:
# (field, transformers' default, accepted(value), what Tunix does).
_FIXED_FIELDS = (
    ("hidden_act", "silu", lambda v: v == "silu", "it uses silu"),
    ("attention_bias", False, lambda v: not v, "it has no attention bias"),
    ("mlp_bias", False, lambda v: not v, "it has no MLP bias"),
    ("use_sliding_window", False, lambda v: not v, "it has full attention"),
    (
        "layer_types",
        None,
        lambda v: all(t == "full_attention" for t in v or []),
        "it has full attention",
    ),
    ("attention_dropout", 0.0, lambda v: not v, "it has no dropout"),
    ("partial_rotary_factor", 1.0, lambda v: v == 1.0, "it rotates all dims"),
    ("quantization_config", None, lambda v: v is None, "it is unquantized"),
)
_FIXED_MOE_FIELDS = (
    # Hugging Face defaults norm_topk_prob to false.
    ("norm_topk_prob", False, lambda v: v is True, "it renormalizes top-k"),
    ("decoder_sparse_step", 1, lambda v: v == 1, "every layer is MoE"),
    ("mlp_only_layers", None, lambda v: not v, "every layer is MoE"),
    ("shared_expert_intermediate_size", 0, lambda v: not v, "no shared expert"),
)


def _check_fixed(hf_config: dict[str, Any], fields: tuple[Any, ...]) -> None:
  for key, default, accepted, reason in fields:
    value = hf_config.get(key, default)
    if not accepted(value):
      raise ValueError(
          f"HF config {key}={value!r} is not supported by Tunix Qwen3:"
          f" {reason}."
      )


def qwen3_config_from_hf(
    hf_config: dict[str, Any], *, dtype: Any = None, param_dtype: Any = None
) -> qwen3_lib.ModelConfig:
  """Builds a Tunix Qwen3 `ModelConfig` from a Hugging Face `config.json`.

  Args:
    hf_config: The parsed `config.json` of a Qwen3 or Qwen3-MoE model.
    dtype: Compute dtype (float32, bfloat16 or float16); float32 if None.
      `torch_dtype` in the file is not used to choose it.
    param_dtype: Parameter dtype; `dtype` (or float32) if None.

  Returns:
    The equivalent `ModelConfig`, with `use_flash_attention=False` (the flash
    path ignores custom attention masks).

  Raises:
    ValueError: If a field is missing, or a setting (model type, RoPE
      variant, attention bias, sliding window, MoE routing, ...) is one the
      Tunix Qwen3 cannot represent. The message names the field.
  """
  if not isinstance(hf_config, dict):
    raise ValueError(f"HF config must be a dict, got {type(hf_config)}.")
  model_type = hf_config.get("model_type")
  if model_type not in _ARCHITECTURES:
    raise ValueError(
        f"HF config model_type={model_type!r} is not supported; expected one"
        f" of {sorted(_ARCHITECTURES)}."
    )
  architectures = hf_config.get("architectures")
  if architectures is not None and architectures != [
      _ARCHITECTURES[model_type]
  ]:
    raise ValueError(
        f"HF config architectures={architectures!r} is not supported for"
        f" model_type {model_type!r}; expected"
        f" [{_ARCHITECTURES[model_type]!r}]."
    )
  _check_fixed(hf_config, _FIXED_FIELDS)
  rope_theta = _rope_theta(hf_config)

  embed_dim = _positive_int(hf_config, "hidden_size")
  num_heads = _positive_int(hf_config, "num_attention_heads")
  if hf_config.get("head_dim") is not None:
    head_dim = _positive_int(hf_config, "head_dim")
  else:
    head_dim = embed_dim // num_heads
    # transformers' Qwen3Config defaults head_dim to 128, not to this.
    if head_dim != 128 or embed_dim % num_heads:
      raise ValueError(
          "HF config is missing field 'head_dim' and hidden_size //"
          f" num_attention_heads = {head_dim} differs from Hugging Face's"
          " Qwen3 default of 128; write head_dim explicitly."
      )
  if hf_config.get("num_key_value_heads") is None:
    # An explicit null means "same as num_attention_heads" in transformers.
    if "num_key_value_heads" not in hf_config:
      _field(hf_config, "num_key_value_heads")
    num_kv_heads = num_heads
  else:
    num_kv_heads = _positive_int(hf_config, "num_key_value_heads")
  if num_heads % num_kv_heads:
    raise ValueError(
        f"HF config num_attention_heads={num_heads} is not a multiple of"
        f" num_key_value_heads={num_kv_heads}."
    )
  norm_eps = hf_config.get("rms_norm_eps", 1e-6)
  if not isinstance(norm_eps, (int, float)) or norm_eps <= 0:
    raise ValueError(f"HF config rms_norm_eps={norm_eps!r} must be positive.")
  tied = hf_config.get("tie_word_embeddings", False)
  if not isinstance(tied, bool):
    raise ValueError(f"HF config tie_word_embeddings={tied!r} must be a bool.")

  num_experts = num_experts_per_tok = None
  if model_type == "qwen3_moe":
    if hf_config.get("num_experts") is None and "num_local_experts" in (
        hf_config
    ):
      # transformers>=5 writes `num_local_experts` for `num_experts`.
      hf_config = {**hf_config, "num_experts": hf_config["num_local_experts"]}
    num_experts = _positive_int(hf_config, "num_experts")
    num_experts_per_tok = _positive_int(hf_config, "num_experts_per_tok")
    hidden_dim = _positive_int(hf_config, "moe_intermediate_size")
    if num_experts_per_tok > num_experts:
      raise ValueError(
          f"HF config num_experts_per_tok={num_experts_per_tok} exceeds"
          f" num_experts={num_experts}."
      )
    _check_fixed(hf_config, _FIXED_MOE_FIELDS)
  else:
    for key in _MOE_FIELDS + ("num_local_experts",):
      if hf_config.get(key):
        raise ValueError(
            f"HF config {key}={hf_config[key]!r} is an MoE field, but"
            " model_type is 'qwen3'; use model_type 'qwen3_moe'."
        )
    hidden_dim = _positive_int(hf_config, "intermediate_size")

  dtype = _dtype("dtype", jnp.float32 if dtype is None else dtype)
  param_dtype = _dtype(
      "param_dtype", dtype if param_dtype is None else param_dtype
  )
  return qwen3_lib.ModelConfig(
      num_layers=_positive_int(hf_config, "num_hidden_layers"),
      vocab_size=_positive_int(hf_config, "vocab_size"),
      embed_dim=embed_dim,
      hidden_dim=hidden_dim,
      num_heads=num_heads,
      head_dim=head_dim,
      num_kv_heads=num_kv_heads,
      rope_theta=rope_theta,
      norm_eps=float(norm_eps),
      use_tied_embedding=tied,
      num_experts=num_experts,
      num_experts_per_tok=num_experts_per_tok,
      dtype=dtype,
      param_dtype=param_dtype,
      use_flash_attention=False,
  )


def qwen3_config_to_hf(
    config: qwen3_lib.ModelConfig, *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
  """Builds a Hugging Face `config.json` dict from a Tunix Qwen3 config.

  Args:
    config: The Tunix model config.
    extra: Additional keys (e.g. `max_position_embeddings`, `bos_token_id`,
      `eos_token_id`, `pad_token_id`). They may not override a key derived
      from `config`.

  Returns:
    A dict that transformers loads as `Qwen3Config` (or `Qwen3MoeConfig`).

  Raises:
    ValueError: If `config` cannot be described faithfully (its RoPE theta
      is not the one Tunix applies, or its dtype is unsupported), or if
      `extra` overrides a derived key.
  """
  if config.rope_theta != TUNIX_ROPE_THETA:
    raise ValueError(
        f"ModelConfig.rope_theta={config.rope_theta!r} cannot be exported:"
        f" Tunix Qwen3 applies RoPE with theta {TUNIX_ROPE_THETA} whatever"
        " the config says, so config.json would describe another model."
    )
  moe = config.num_experts is not None
  model_type = "qwen3_moe" if moe else "qwen3"
  hf_config = {
      "architectures": [_ARCHITECTURES[model_type]],
      "model_type": model_type,
      "vocab_size": config.vocab_size,
      "hidden_size": config.embed_dim,
      "num_hidden_layers": config.num_layers,
      "num_attention_heads": config.num_heads,
      "num_key_value_heads": config.num_kv_heads,
      "head_dim": config.head_dim,
      "hidden_act": "silu",
      "rms_norm_eps": float(config.norm_eps),
      "rope_theta": config.rope_theta,
      "rope_scaling": None,
      "tie_word_embeddings": bool(config.use_tied_embedding),
      "attention_bias": False,
      "attention_dropout": 0.0,
      "use_sliding_window": False,
      "sliding_window": None,
      "torch_dtype": jnp.dtype(_dtype("param_dtype", config.param_dtype)).name,
  }
  if moe:
    hf_config.update({
        "num_experts": config.num_experts,
        "num_experts_per_tok": config.num_experts_per_tok,
        "moe_intermediate_size": config.hidden_dim,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    })
  else:
    hf_config["intermediate_size"] = config.hidden_dim
  for key, value in (extra or {}).items():
    if key in hf_config:
      raise ValueError(
          f"extra key {key!r} would override a field derived from ModelConfig."
      )
    hf_config[key] = value
  return hf_config


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
  config = qwen3_config_from_hf(_read_config(checkpoint_dir), dtype=dtype)
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
  hf_config = qwen3_config_to_hf(model.config, extra=hf_config_extra)
  tensors = _hf_tensors(model)
  dtypes = {v.dtype.name for v in tensors.values()}
  if len(dtypes) == 1:
    hf_config["torch_dtype"] = dtypes.pop()  # what the files really hold
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
      json.dump(hf_config, f, indent=2, sort_keys=True)
    _write_weights(tmp_dir, tensors, max_shard_bytes)
    _fsync_tree(tmp_dir)
    # rename(2) atomically replaces an empty directory and fails otherwise.
    os.replace(tmp_dir, output_dir)
  except BaseException:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  _fsync_dir(parent)
