# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Which format an export is in (`export.format`), and whether the model fits.

`tunix_bd` (the default) is the source checkpoint's HF format plus
`block_diffusion.json` (`bd_export`); `sdar` and `fast_dllm_v2` are
checkpoints of those formats that keep `block_diffusion.json` beside the
format's fields. `export.reference_code=DIR` copies a user's copy of the
format's modeling code into the export (`REFERENCE_CODE`). This module
checks, before any compute (`check_options`, `check_run`), that the model
fits the format and the files can be written; docs/formats.md "Export"
lists the fields and refusals.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from tunix_bd import config_utils
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.models import bd_formats
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_source

TUNIX_BD = "tunix_bd"
FORMATS = (TUNIX_BD, bd_formats.SDAR, bd_formats.FAST_DLLM_V2)
FORMAT_KEY = "export.format"
REFERENCE_CODE_KEY = "export.reference_code"
# Fast-dLLM v2's `generate` does not pass its `block_size` to the denoising
# forwards, whose inference mask then has blocks of 32 (docs/formats.md): a
# block size must divide 32, or a block straddles a multiple of 32.
FAST_DLLM_MASK_BLOCK = 32


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

  `tunix_bd` expresses everything; the others refuse the other alignment
  (SDAR is same-position, Fast-dLLM v2 shifted) or layers, and Fast-dLLM v2
  a mask token other than `|<MASK>|` or a block size that does not divide
  `FAST_DLLM_MASK_BLOCK`. `mask_token` is None for an id no string encodes
  to.
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
    if FAST_DLLM_MASK_BLOCK % block_size:
      raise ValueError(
          f"{where}: bd.block_size={block_size} does not divide"
          f" {FAST_DLLM_MASK_BLOCK}; Fast-dLLM v2's generate masks its"
          f" denoising forwards with blocks of {FAST_DLLM_MASK_BLOCK}, which"
          " would cut this model's blocks. Train with a bd.block_size"
          f" dividing {FAST_DLLM_MASK_BLOCK} (1, 2, 4, 8, 16 or 32), or"
          f" export with {FORMAT_KEY}={TUNIX_BD}."
      )


def check_options(section: Any) -> None:
  """Checks an `export` section's `format` and `reference_code` keys."""
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

  `mask_token` is the mask token's string (`mask_token_string`);
  `vocab_size` its tokenizer's size; `source` the checkpoint it is loaded
  from, or None for a random model of shape `scratch` (`model.scratch`).
  """
  check_options(section)
  if section.format == TUNIX_BD:
    return
  if source is not None:
    model_config = bd_formats.model_config_from_hf(source.config)
  else:
    settings = config_utils.nested(
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
