# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Exporting a block-diffusion model in SDAR's or Fast-dLLM v2's format.

`export.format` chooses what a recipe's export directory is:

  * `tunix_bd` (the default): the source checkpoint's HF format plus
    `block_diffusion.json` (`bd_export`).
  * `sdar`: an SDAR checkpoint (`SDARForCausalLM`, model_type `sdar`, its
    `auto_map`, `block_size`, `mask_token_id`); the tokenizer's EOS is its
    pad and `generation_config.json` lists the turn end first, as SDAR's
    released checkpoints.
  * `fast_dllm_v2`: a Fast-dLLM v2 checkpoint (`Fast_dLLM_QwenForCausalLM`,
    model_type `Fast_dLLM_Qwen`, its `auto_map`, `bd_size`; the mask is the
    tokenizer's `|<MASK>|`, as config.json has no mask field).

Both keep `block_diffusion.json` beside the format's fields (they agree;
the import reads either). `check_exportable` refuses, naming the key and
the fix, what the format cannot express: the other alignment (SDAR is
same-position, Fast-dLLM v2 shifted), other layers (SDAR: Qwen3 without
attention biases; Fast-dLLM v2: Qwen2 with q/k/v biases), a Fast-dLLM v2
mask token other than `|<MASK>|` or block above the 32 its decoder masks
with. The formats' modeling code is not part of tunix_bd:
`export.reference_code=DIR` copies a user's local copy of it into the
export (`REFERENCE_CODE` lists the files), which their code then loads
with `trust_remote_code=True` (docs/formats.md, "Export").
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from typing import Any, Iterable

import jax.numpy as jnp

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.models import bd_formats
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config
from tunix_bd.models import hf_source

TUNIX_BD = "tunix_bd"
FORMATS = (TUNIX_BD, bd_formats.SDAR, bd_formats.FAST_DLLM_V2)
FORMAT_KEY = "export.format"
REFERENCE_CODE_KEY = "export.reference_code"
# Fast-dLLM v2's `generate` does not pass its `block_size` to the denoising
# forwards, whose inference mask then has blocks of 32 (docs/formats.md).
FAST_DLLM_MAX_BLOCK = 32


@dataclasses.dataclass(frozen=True)
class ReferenceCode:
  """Where a format's modeling files come from and which it needs.

  Attributes:
    files: the files its `auto_map` loads (and what they import).
    origin: where a user finds them.
  """

  files: tuple[str, ...]
  origin: str


REFERENCE_CODE = {
    bd_formats.SDAR: ReferenceCode(
        files=(
            "modeling_sdar.py",
            "configuration_sdar.py",
            "fused_linear_diffusion_cross_entropy.py",
        ),
        origin="training/model/SDAR-4B-Chat/ of github.com/JetAstra/SDAR",
    ),
    bd_formats.FAST_DLLM_V2: ReferenceCode(
        files=("modeling.py", "configuration.py"),
        origin=(
            "the Hugging Face model repository"
            " Efficient-Large-Model/Fast_dLLM_v2_7B"
        ),
    ),
}
_LABELS = {bd_formats.SDAR: "SDAR", bd_formats.FAST_DLLM_V2: "Fast-dLLM v2"}
_FAMILY_NAMES = {
    "qwen3": "Qwen3 layers without attention biases",
    "qwen2": "Qwen2 layers with q/k/v biases",
}
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


def check_format(value: Any, key: str = FORMAT_KEY) -> str:
  """`value` if it is one of `FORMATS`.

  Raises:
    ValueError: naming `key`, for anything else.
  """
  if not isinstance(value, str) or value not in FORMATS:
    raise ValueError(f"{key}={value!r} must be one of {list(FORMATS)}.")
  return value


def check_reference_code(fmt: str, directory: str) -> None:
  """Fails closed unless `directory` ("" for none) holds `fmt`'s files.

  Each file must exist and each `auto_map` class be defined in its module.

  Raises:
    ValueError: naming `export.reference_code`, for a directory with
      `export.format=tunix_bd`, or one that lacks a file or class.
  """
  if not directory:
    return
  if fmt not in REFERENCE_CODE:
    raise ValueError(
        f"{REFERENCE_CODE_KEY}={directory!r} is only read with"
        f" {FORMAT_KEY}=sdar or fast_dllm_v2, not {fmt!r}."
    )
  code = REFERENCE_CODE[fmt]
  missing = [
      f for f in code.files if not os.path.isfile(os.path.join(directory, f))
  ]
  for target in bd_formats.FORMATS[fmt].auto_map.values():
    module, cls = target.rsplit(".", 1)
    path = os.path.join(directory, module + ".py")
    if os.path.isfile(path):
      with open(path) as f:
        if not re.search(rf"^class {cls}\b", f.read(), re.MULTILINE):
          missing.append(f"class {cls} in {module}.py")
  if missing:
    raise ValueError(
        f"{REFERENCE_CODE_KEY}={directory!r} lacks {', '.join(missing)}:"
        f" it must hold {_LABELS[fmt]}'s modeling files"
        f" {list(code.files)} (from {code.origin})."
    )


def mask_token_string(tokenizer: Any, mask_id: int) -> str | None:
  """The string the tokenizer gives `mask_id`; None for a row past it."""
  if mask_id >= len(tokenizer):
    return None
  return tokenizer.convert_ids_to_tokens(mask_id)


def check_exportable(
    fmt: str,
    *,
    alignment: str,
    block_size: int,
    model_config: Any,
    mask_token: str | None,
) -> None:
  """Fails closed, naming the key and the fix, on what `fmt` cannot express.

  Args:
    fmt: one of `FORMATS`; `tunix_bd` expresses everything.
    alignment: the model's `bd.alignment`.
    block_size: its block size.
    model_config: its Tunix model config.
    mask_token: the mask token's string (None: an id no string encodes to).

  Raises:
    ValueError: naming `export.format`, for the other alignment or layers,
      or (Fast-dLLM v2) a mask token other than `|<MASK>|` or a block size
      above `FAST_DLLM_MAX_BLOCK`.
  """
  check_format(fmt)
  if fmt == TUNIX_BD:
    return
  spec = bd_formats.FORMATS[fmt]
  where = f"{FORMAT_KEY}={fmt!r} ({_LABELS[fmt]})"
  family = families.family(model_config)
  if alignment != spec.alignment:
    meaning = {
        bd_config_lib.SAME_POSITION: "the logit at i predicts token i",
        bd_config_lib.SHIFTED: "the logit at i - 1 predicts token i",
    }[spec.alignment]
    other = [
        f.name
        for f in bd_formats.FORMATS.values()
        if f.alignment == alignment and f.family_type == family
    ]
    raise ValueError(
        f"{where} holds {spec.alignment} logits ({meaning}), but the model"
        f" is {alignment}: train one with bd.alignment={spec.alignment}"
        f" (sft.py), or export with {FORMAT_KEY}="
        + " or ".join(other + [TUNIX_BD])
        + "."
    )
  if family != spec.family_type or getattr(model_config, "num_experts", None):
    raise ValueError(
        f"{where} has {_FAMILY_NAMES[spec.family_type]}, but the model is a"
        f" Tunix {family}"
        f"{' MoE' if getattr(model_config, 'num_experts', None) else ''}:"
        f" export it with {FORMAT_KEY}={TUNIX_BD}, or convert a"
        f" {spec.family_type} checkpoint."
    )
  if fmt == bd_formats.FAST_DLLM_V2:
    if mask_token != spec.mask_token:
      raise ValueError(
          f"{where} names its mask token {spec.mask_token!r} (config.json"
          " has no mask id field), but the model's mask token is"
          f" {mask_token!r}: train with bd.mask_token={spec.mask_token!r}"
          f" (sft.py), or export with {FORMAT_KEY}={TUNIX_BD}."
      )
    if block_size > FAST_DLLM_MAX_BLOCK:
      raise ValueError(
          f"{where}: bd.block_size={block_size} is above"
          f" {FAST_DLLM_MAX_BLOCK}; Fast-dLLM v2's generate masks its"
          f" denoising forwards with blocks of {FAST_DLLM_MAX_BLOCK}, so it"
          " would not decode this model. Train with bd.block_size <="
          f" {FAST_DLLM_MAX_BLOCK}, or export with {FORMAT_KEY}={TUNIX_BD}."
      )


def check_options(section: Any) -> None:
  """Checks an `export` section's `format` and `reference_code` keys.

  Raises:
    ValueError: as `check_format` and `check_reference_code`.
  """
  fmt = check_format(section.format)
  check_reference_code(fmt, section.reference_code)


def check_run(
    section: Any,
    *,
    bd: Any,
    mask_token: str | None,
    vocab_size: int,
    source: hf_source.Source | None,
    scratch: Any = None,
) -> None:
  """Before any compute: the run's model is exportable as `section` asks.

  Args:
    section: the `export` section.
    bd: the model's block-diffusion settings (its `alignment` and
      `block_size`).
    mask_token: its mask token's string (`mask_token_string`; None for an
      id no string encodes to).
    vocab_size: its tokenizer's size (a random model's vocabulary).
    source: the checkpoint it is loaded from, or None for a random model
      of the `scratch` section (`model.scratch`, a Qwen3).

  Raises:
    ValueError: as `check_options` and `check_exportable`.
  """
  check_options(section)
  if section.format == TUNIX_BD:
    return
  if source is not None:
    model_config = bd_formats.model_config_from_hf(source.config)
  else:
    settings = config_utils.from_section(
        from_scratch.ScratchModelSettings, scratch, "model.scratch"
    )
    model_config = from_scratch.qwen3_config(settings, vocab_size)
  check_exportable(
      section.format,
      alignment=bd.alignment,
      block_size=bd.block_size,
      model_config=model_config,
      mask_token=mask_token,
  )


def _base_config(
    fmt: str,
    model_config: Any,
    source: hf_source.Source | None,
    tokenizer: Any,
) -> dict[str, Any]:
  """What `fmt`'s fields are written over: the source's config (a source in
  another format as its Qwen3/Qwen2 config), or the model's."""
  if source is None:
    out = hf_config.config_to_hf(model_config)
    ids = {
        "bos_token_id": getattr(tokenizer, "bos_token_id", None),
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    out.update({k: v for k, v in ids.items() if v is not None})
    return out
  found = bd_formats.detect(source.config)
  if found is None or found.name == fmt:
    return dict(source.config)
  return bd_formats.family_config(source.config, found)


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
  (or, without a source, the model's) with the format's fields.

  Args:
    fmt: `sdar` or `fast_dllm_v2`.
    model_config: the exported model's Tunix config.
    source: the checkpoint it was loaded from, or None.
    tokenizer: its tokenizer, before `format_tokenizer`.
    bd: its block-diffusion settings.
    stop_ids: further ids that end generation.
  """
  spec = bd_formats.FORMATS[fmt]
  config = _base_config(fmt, model_config, source, tokenizer)
  layers = model_config.num_layers
  eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
  if fmt == bd_formats.SDAR:
    defaults = {**_SDAR_DEFAULTS, "max_window_layers": layers}
    fields = {"block_size": bd.block_size, "mask_token_id": bd.mask_token_id}
    if pad is not None:  # SDAR's EOS is its pad; the turn end is in the
      config["eos_token_id"] = pad  # generation config (`format_tokenizer`).
      config.setdefault("bos_token_id", pad)
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
  eos_ids = [i for i in (eos, *map(int, stop_ids), pad) if i is not None]
  generation["eos_token_id"] = list(dict.fromkeys(eos_ids))
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
  """A copy of the tokenizer as `fmt` ships it (SDAR: EOS = pad).

  SDAR's tokenizers have `<|endoftext|>` as EOS and pad, and stop at the
  turn end through `generation_config.json`; the import
  (`bd_formats.adapt_tokenizer`) turns the EOS back into that turn end.
  """
  if fmt != bd_formats.SDAR or tokenizer.pad_token is None:
    return tokenizer
  out = copy.deepcopy(tokenizer)
  out.eos_token = tokenizer.pad_token
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


def copy_reference_code(fmt: str, directory: str, export_dir: str) -> None:
  """Copies `fmt`'s modeling files from `directory` into `export_dir`."""
  for name in REFERENCE_CODE[fmt].files:
    with open(os.path.join(directory, name), "rb") as f:
      files.write_bytes(os.path.join(export_dir, name), f.read())
