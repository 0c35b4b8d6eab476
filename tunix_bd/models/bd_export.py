# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A block-diffusion export: the HF directory plus `block_diffusion.json`.

What SFT, OPD and GRPO write: `export.export_checkpoint`'s directory with
the block-diffusion settings, the mask token's string and the chat switches
trained with (`chat.SETTINGS_KEY`). `export.format` is `tunix_bd` (the
source's HF format), `sdar` or `fast_dllm_v2` (that format's fields, with
`export.reference_code`'s copy of its modeling code). `check_exportable`
refuses before compute what a format cannot express; docs/formats.md
"Export" lists the fields and refusals.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Iterable, Mapping

import jax.numpy as jnp

from tunix_bd import files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.models import bd_formats
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config
from tunix_bd.models import mask_token as mask_token_lib

TUNIX_BD = "tunix_bd"
FORMATS = (TUNIX_BD, bd_formats.SDAR, bd_formats.FAST_DLLM_V2)
FORMAT_KEY = "export.format"
REFERENCE_CODE_KEY = "export.reference_code"
# Fast-dLLM v2's `generate` does not pass its `block_size` to the denoising
# forwards, whose inference mask then has blocks of 32 (docs/formats.md): a
# block size must divide 32, or a block straddles a multiple of 32.
FAST_DLLM_MASK_BLOCK = 32


# Each format's modeling files (those its `auto_map` loads and what they
# import), and where a user finds them.
REFERENCE_CODE = {
    bd_formats.SDAR: (
        (
            "modeling_sdar.py",
            "configuration_sdar.py",
            "fused_linear_diffusion_cross_entropy.py",
        ),
        "training/model/SDAR-4B-Chat/ of github.com/JetAstra/SDAR",
    ),
    bd_formats.FAST_DLLM_V2: (
        ("modeling.py", "configuration.py"),
        (
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


def check_format(value: Any, key: str = FORMAT_KEY) -> str:
  """`value` if it is one of `FORMATS`, else a ValueError naming `key`."""
  if not isinstance(value, str) or value not in FORMATS:
    raise ValueError(f"{key}={value!r} must be one of {list(FORMATS)}.")
  return value


def check_reference_code(fmt: str, directory: str) -> None:
  """Fails closed unless `directory` ("" for none) holds `fmt`'s files and
  defines each `auto_map` class; any directory is refused for `tunix_bd`."""
  if not directory:
    return
  if fmt not in REFERENCE_CODE:
    raise ValueError(
        f"{REFERENCE_CODE_KEY}={directory!r} is only read with"
        f" {FORMAT_KEY}=sdar or fast_dllm_v2, not {fmt!r}."
    )
  names, origin = REFERENCE_CODE[fmt]
  missing = [f for f in names if not os.path.isfile(os.path.join(directory, f))]
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
        f" {list(names)} (from {origin})."
    )


def check_exportable(
    fmt: str, bd: Any, model_config: Any, mask_token: str | None
) -> None:
  """Fails closed, naming the key and the fix, on what `fmt` cannot express
  (docs/formats.md "Refusals"). `bd` has the model's `alignment` and
  `block_size`; `mask_token` is None for an id no string encodes to."""
  check_format(fmt)
  if fmt == TUNIX_BD:
    return
  alignment, block_size = bd.alignment, bd.block_size
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
    if FAST_DLLM_MASK_BLOCK % block_size:
      raise ValueError(
          f"{where}: bd.block_size={block_size} does not divide"
          f" {FAST_DLLM_MASK_BLOCK}; Fast-dLLM v2's generate masks its"
          f" denoising forwards with blocks of {FAST_DLLM_MASK_BLOCK}, which"
          " would cut this model's blocks. Train with a bd.block_size"
          f" dividing {FAST_DLLM_MASK_BLOCK} (1, 2, 4, 8, 16 or 32), or"
          f" export with {FORMAT_KEY}={TUNIX_BD}."
      )


def export_block_diffusion(
    model: Any,
    tokenizer: Any,
    export_dir: str,
    *,
    bd: bd_config_lib.BlockDiffusionConfig,
    chat_options: chat.ChatOptions,
    source: hf_checkpoint.Source | None,
    dtype: str | None = None,
    stop_ids: Iterable[int] = (),
    extra: Mapping[str, Any] | None = None,
    fmt: str = TUNIX_BD,
    reference_code: str = "",
) -> None:
  """Writes a block-diffusion export of `model` (LoRA merged), replacing a
  previous one; `extra` are provenance entries for `block_diffusion.json`,
  `fmt` and `reference_code` the `export` keys. Refusals come before any
  write. The mask token becomes `tokenizer`'s `mask_token`."""
  mask_token = mask_token_lib.register_mask_token(tokenizer, bd.mask_token_id)
  check_exportable(fmt, bd, model.config, mask_token)
  check_reference_code(fmt, reference_code)
  # What tunix_bd stops at, EOS first, which a format's generation config
  # cannot tell from the pad it lists as an EOS (`bd_formats.adapt_tokenizer`).
  stops = list(special_ids.ordered_stop_ids(tokenizer, list(stop_ids)))
  extra = {**dict(extra or {}), bd_formats.STOP_IDS_KEY: stops}
  if fmt != TUNIX_BD:
    # The id a format lists last as an EOS (SDAR: its EOS and pad): the pad,
    # as SDAR-4B-Chat's `<|endoftext|>`, or the stop id the import moved the
    # pad off (`bd_formats.adapt_tokenizer`), as no format's code stops at
    # the pad it gave.
    moved = special_ids.checkpoint_stop_ids(tokenizer)
    last = moved[-1] if moved else tokenizer.pad_token_id
    source = format_source(
        fmt, model.config, source, tokenizer, bd, stops, last
    )
    if fmt == bd_formats.SDAR and last is not None:
      # SDAR's tokenizers have `<|endoftext|>` as EOS and pad, and stop at
      # the turn end through `generation_config.json`; the import
      # (`bd_formats.adapt_tokenizer`) turns the EOS back into that turn end.
      tokenizer = copy.deepcopy(tokenizer)
      tokenizer.eos_token = tokenizer.convert_ids_to_tokens(last)

  def finish(directory: str) -> None:  # In the export before its rename.
    if fmt != TUNIX_BD:
      write_legacy_tokenizer_config(directory)
    if reference_code:  # Copies the format's modeling files.
      for name in REFERENCE_CODE[fmt][0]:
        with open(os.path.join(reference_code, name), "rb") as f:
          files.write_bytes(os.path.join(directory, name), f.read())
    bd_config_lib.save_settings(
        bd,
        directory,
        extra={**extra, chat.SETTINGS_KEY: chat_options.to_dict()},
        mask_token=mask_token,
    )

  export.export_checkpoint(
      model,
      tokenizer,
      export_dir,
      source=source,
      dtype=hf_checkpoint.check_export_dtype(dtype, "export.dtype"),
      stop_ids=stop_ids,
      finish=finish,
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


def format_source(
    fmt: str,
    model_config: Any,
    source: hf_checkpoint.Source | None,
    tokenizer: Any,
    bd: bd_config_lib.BlockDiffusionConfig,
    stops: list[int],
    last: int | None,
) -> hf_checkpoint.Source:
  """The `hf_checkpoint.Source` whose export is in `fmt`: the source's (or
  the model's) config with the format's fields; the other arguments are
  `export_block_diffusion`'s (`tokenizer` before SDAR's EOS change)."""
  spec = bd_formats.FORMATS[fmt]
  derived = hf_config.config_to_hf(model_config)
  if source is None:
    config = {**derived, **hf_checkpoint.tokenizer_ids(tokenizer)}
  else:  # A source in another format gives its Qwen3/Qwen2 config.
    found = bd_formats.detect(source.config)
    config = dict(source.config)
    if found is not None and found.name != fmt:
      config = bd_formats.family_config(source.config, found)
  layers = model_config.num_layers
  pad = tokenizer.pad_token_id
  if fmt == bd_formats.SDAR:
    defaults = {**_SDAR_DEFAULTS, "max_window_layers": layers}
    fields = {"block_size": bd.block_size, "mask_token_id": bd.mask_token_id}
    if last is not None:  # SDAR's EOS is its pad; the turn end is in the
      config["eos_token_id"] = last  # generation config.
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
  config["rope_theta"] = derived["rope_theta"]
  config["rope_scaling"] = None  # Tunix implements the default RoPE only.
  generation = dict((source.generation_config if source else None) or {})
  eos_ids = [*stops, last]
  generation["eos_token_id"] = list(
      dict.fromkeys(i for i in eos_ids if i is not None)
  )
  if pad is not None:
    generation["pad_token_id"] = pad
  if config.get("bos_token_id") is not None:
    generation["bos_token_id"] = config["bos_token_id"]
  if source is not None:
    return hf_checkpoint.Source(config, generation, source.tensor_dtypes)
  dtype = jnp.dtype(model_config.param_dtype).name
  keys = hf_checkpoint.expected_shapes(model_config)
  return hf_checkpoint.Source(config, generation, dict.fromkeys(keys, dtype))


def write_legacy_tokenizer_config(export_dir: str) -> None:
  """Rewrites `tokenizer_config.json` for the formats' transformers 4.5x,
  which fails on transformers 5's list of `extra_special_tokens` (it reads
  `additional_special_tokens`) and `TokenizersBackend`."""
  path = os.path.join(export_dir, "tokenizer_config.json")
  if not files.exists(path):
    return
  content = json.loads(files.read_text(path))
  changed = dict(content)
  if isinstance(changed.get("extra_special_tokens"), list):
    changed["additional_special_tokens"] = changed.pop("extra_special_tokens")
  if changed.get("tokenizer_class") == "TokenizersBackend":
    changed["tokenizer_class"] = "PreTrainedTokenizerFast"
  if changed != content:
    files.write_text(path, json.dumps(changed, indent=2) + "\n")
