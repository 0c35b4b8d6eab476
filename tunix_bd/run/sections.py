# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The recipes' own typed config sections: `model`, SFT's `bd` and `lora`,
and `export` (a library package's live beside what they configure).

Each dataclass is a config section field for field and the one source of
its defaults (`config_utils`); one class may serve several sections, each
holding the fields its `*_KEYS` below name. The fingerprint rule is declared
on the fields: `config_utils.resumable()` and `config_utils.source()`
(docs/design.md, "Fingerprint").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd.core import splash_attention
from tunix_bd.models import bd_export
from tunix_bd.models import export as export_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import lora
from tunix_bd.models import precision as precision_lib

_CHECKPOINT = config_utils.CHECKPOINT
# Where the embedded default's checkpoints come from, for directory hints.
RUN_THE_QUICKSTART = (
    "run the quickstart first (`tunix run --plugin tunix_bd quickstart.py`)."
)


# `model.sft_loss`: tunix_bd's loss hook, or Tunix's diffusion SFT adapter.
HOOK_SFT_LOSS = "tunix_bd"
TUNIX_SFT_LOSS = "tunix"
SFT_LOSSES = (HOOK_SFT_LOSS, TUNIX_SFT_LOSS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BdSettings:
  """Block-diffusion settings: SFT's `bd`, what the model is converted to;
  `model.scratch_bd` (`SCRATCH_BD_KEYS`), a random converted model's.

  Attributes:
    block_size: tokens per block.
    mask_token: a token of the tokenizer, a reserved id, or a new token
      that is added (growing the embedding) when the tokenizer lacks it.
    alignment: `shifted` (the AR head keeps its meaning) or
      `same_position`.
    layout: `clean_context` (`[noisy ; clean]`) or `single_canvas`.
  """

  block_size: int = 8
  mask_token: str = "<|mask|>"
  alignment: str = bd_config.SHIFTED
  layout: str = bd_config.CLEAN_CONTEXT

  def __post_init__(self):
    key = lambda name: config_utils.key(name, "bd")
    config_utils.check_int(key("block_size"), self.block_size, 1)
    config_utils.check_choice(
        key("alignment"), self.alignment, bd_config.ALIGNMENTS
    )
    config_utils.check_choice(key("layout"), self.layout, bd_config.LAYOUTS)


# `model.scratch_bd`'s keys: a random model's tokenizer has its mask token.
SCRATCH_BD_KEYS = ("block_size", "alignment", "layout")


def _scratch_bd() -> BdSettings:
  return config_utils.nested(
      BdSettings, {}, "model.scratch_bd", SCRATCH_BD_KEYS
  )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSettings:
  """A recipe's `model`: the checkpoints it reads, or a random model, and
  the compute precision (`models.precision`).

  Each recipe's section holds some of the keys: SFT's, the AR checkpoint to
  convert (`SFT_MODEL_KEYS`); GRPO's, the policy, its KL reference and a
  model to compare (`SECTION_KEYS`); OPD's, the student and the causal AR
  teacher (`OPD_MODEL_KEYS`); generate's, the converted model to decode
  (`DECODE_MODEL_KEYS`: no `logits_chunk`, it computes no loss); compare's,
  an AR model and its conversion (`COMPARE_MODEL_KEYS`). GRPO's and OPD's
  may be a random model, for runs needing no checkpoint.

  `dtype`, `remat`, `logits_chunk`, `attention` and `scan_layers`:
  docs/real_models.md, "Precision and memory"; only `dtype` changes what a
  run computes (the others are resumable).

  Attributes:
    random_init: False: load the checkpoints; True: a random model of the
      `scratch` shape with the embedded tokenizer and the `scratch_bd`
      block-diffusion settings (smoke runs).
    scratch: the random model's shape.
    scratch_bd: its block-diffusion settings (`SCRATCH_BD_KEYS`).
    student: OPD: the converted student (with block_diffusion.json).
    teacher: OPD: the AR teacher; one tokenizer with the student.
    checkpoint: SFT: the AR model to convert, an HF-style directory:
      config.json, *.safetensors and the tokenizer (a Qwen3 or Qwen2; its
      config sets `runs/ar_pretrain/export`). GRPO: the policy, a converted
      model (with block_diffusion.json); generate: the converted model
      (`sft.py`'s `export/`, or an SDAR or Fast-dLLM v2 directory).
    reference: GRPO: the frozen KL reference, a converted model of the
      policy's block settings and tokenizer; empty: the initial policy (as
      Tunix, TRL and verl), so `model.checkpoint` once checked (with
      `random_init`, a copy of the random policy).
    continued_sft: GRPO: optional, another converted model evaluated beside
      the policy before and after (the report's `continued SFT`); it is only
      evaluated, so a resume may change it.
    ar: compare: the AR model, an HF-style directory.
    bd: compare: its block-diffusion conversion (`sft.py`'s export, with
      `block_diffusion.json`).
    sft_loss: SFT: `tunix_bd`, tunix_bd's loss hook (`sft.loss`); `tunix`,
      Tunix's own diffusion SFT adapter (`sft.tunix_diffusion`): dense
      logits, no aux metrics. Equal losses to float rounding: resumable.
  """

  dtype: str = "float32"
  remat: str = config_utils.resumable(default="none")
  logits_chunk: int = config_utils.resumable(default=8192)
  random_init: bool = False
  scratch: from_scratch.ScratchModelSettings = dataclasses.field(
      default_factory=from_scratch.ScratchModelSettings
  )
  scratch_bd: BdSettings = dataclasses.field(default_factory=_scratch_bd)
  student: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  teacher: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )
  checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  reference: str = config_utils.source(_CHECKPOINT)
  continued_sft: str = config_utils.source(
      _CHECKPOINT, metadata={config_utils.RESUMABLE: True}
  )
  ar: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )
  bd: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  sft_loss: str = config_utils.resumable(default=HOOK_SFT_LOSS)
  attention: str = config_utils.resumable(default=splash_attention.DENSE)
  scan_layers: bool = config_utils.resumable(default=False)

  # GRPO's `model` keys.
  SECTION_KEYS = (
      "random_init",
      "scratch",
      "scratch_bd",
      "dtype",
      "remat",
      "logits_chunk",
      "checkpoint",
      "reference",
      "continued_sft",
  )

  def __post_init__(self):
    self.precision  # pylint: disable=pointless-statement; checks the values.
    if not isinstance(self.random_init, bool):
      raise ValueError(
          f"model.random_init must be a bool, got {self.random_init!r}."
      )
    for name, cls, keys in (
        ("scratch", from_scratch.ScratchModelSettings, ()),
        ("scratch_bd", BdSettings, SCRATCH_BD_KEYS),
    ):
      value = config_utils.nested(
          cls, getattr(self, name), f"model.{name}", keys
      )
      object.__setattr__(self, name, value)
    config_utils.check_choice("model.sft_loss", self.sft_loss, SFT_LOSSES)
    splash_attention.check_attention(self.attention)
    if not isinstance(self.scan_layers, bool):
      raise ValueError(
          f"model.scan_layers must be a bool, got {self.scan_layers!r}."
      )
    if (
        self.attention == splash_attention.SPLASH
        and self.sft_loss != HOOK_SFT_LOSS
    ):
      raise ValueError(
          f"model.attention={self.attention!r} runs in tunix_bd's loss hook;"
          f" set model.sft_loss={HOOK_SFT_LOSS!r}."
      )
    if not self.reference and not self.random_init:
      # Named, so that the fingerprint holds the reference's digest.
      object.__setattr__(self, "reference", self.checkpoint)

  @property
  def precision(self) -> precision_lib.Precision:
    """The settings as `models.precision` takes them."""
    keys = config_utils.section_keys(self)
    return precision_lib.Precision(
        dtype=self.dtype,
        remat=self.remat,
        logits_chunk=self.logits_chunk if "logits_chunk" in keys else 0,
    )

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (see `Stage`)."""
    keys = config_utils.section_keys(self)
    if "ar" in keys:
      return (
          "; the quickstart writes runs/quickstart/ar_pretrain/export (AR) and"
          " runs/quickstart/sft/export (its conversion)."
      )
    if "sft_loss" in keys and not getattr(self, key):
      return (
          ": set --config.model.checkpoint=DIR to a Hugging Face Qwen3 or"
          " Qwen2 checkpoint directory (its config.json, weights and"
          " tokenizer)."
      )
    if "sft_loss" in keys:
      return (
          ". On the embedded default, train the AR teacher first (`tunix run"
          " --plugin tunix_bd ar_pretrain.py`); otherwise point it at an HF"
          " Qwen3 or Qwen2 directory."
      )
    if key in ("student", "teacher"):  # OPD's.
      found = []
      what = (
          "the AR teacher (e.g. runs/quickstart/ar_pretrain/export, or"
          " ar_pretrain.py's workdir/export)"
      )
      if key == "student":
        found = export_lib.find_block_diffusion_exports("runs")
        what = (
            "the converted student (e.g. runs/quickstart/sft/export, or"
            " sft.py's workdir/export)"
        )
      listed = f"; converted models under runs/: {', '.join(found)}"
      return (
          f": set --config.model.{key}=DIR to {what}{listed if found else ''}."
          " On the embedded default, `tunix run --plugin tunix_bd"
          " quickstart.py` makes both."
      )
    if key != "checkpoint":
      return ""
    if "random_init" not in keys:  # Generate's.
      found = export_lib.find_block_diffusion_exports("runs")
      if found:
        return (
            f"; converted models under runs/: {', '.join(found)}; pass one"
            " with --config.model.checkpoint=DIR."
        )
      return (
          "; no converted model under runs/; make one with `tunix run"
          " --plugin tunix_bd quickstart.py` (or sft.py on your own AR model)."
      )
    return (
        ": it must be a converted model directory; on the embedded default"
        f" {RUN_THE_QUICKSTART}"
    )


# SFT's `model` keys.
SFT_MODEL_KEYS = (
    "dtype",
    "remat",
    "logits_chunk",
    "checkpoint",
    "sft_loss",
    "attention",
    "scan_layers",
)
# Generate's `model` keys.
DECODE_MODEL_KEYS = ("dtype", "remat", "checkpoint")
# Compare's `model` keys.
COMPARE_MODEL_KEYS = ("ar", "bd")
# OPD's `model` keys.
OPD_MODEL_KEYS = (*ModelSettings.SECTION_KEYS[:6], "student", "teacher")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoraSettings:
  """SFT's `lora`: rank 0 fine-tunes every weight; > 0 trains LoRA adapters.

  Tunix trains and checkpoints only the `nnx.LoRAParams`; the export merges
  them.
  """

  rank: int = 0
  alpha: float = 16.0
  module_path: str = lora.DEFAULT_MODULE_PATH

  def __post_init__(self):
    config_utils.check_int("lora.rank", self.rank, 0)
    config_utils.check_number("lora.alpha", self.alpha, 0, strict=True)

  def apply(self, model: Any, *, seed: int, mesh: Any) -> Any:
    """`model` with adapters (rank > 0), or as it is."""
    if not self.rank:
      return model
    with mesh_lib.tunix_context(mesh):
      return lora.apply_lora(
          model,
          rank=self.rank,
          alpha=self.alpha,
          module_path=self.module_path,
          seed=seed,
          mesh=mesh,
      )

  def merge(self, model: Any, model_config: Any) -> Any:
    """`model` with its adapters merged into the weights, for export."""
    if not self.rank:
      return model
    return lora.merge_lora(model, model_config, alpha=self.alpha)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportSettings:
  """The `export` section of a recipe that writes an HF export.

  `dtype`: the export's weight dtype (`float32`, `bfloat16` or `float16`);
  empty keeps the source checkpoint's. `format` (`tunix_bd`, `sdar` or
  `fast_dllm_v2`) and `reference_code` (the format's own modeling files to
  copy in): docs/formats.md, "Export".
  """

  # What is written at the end, never what the checkpoints mean.
  dtype: str = config_utils.resumable(default="")
  format: str = config_utils.resumable(default=bd_export.TUNIX_BD)
  reference_code: str = config_utils.resumable(default="")

  def __post_init__(self):
    hf_checkpoint.check_export_dtype(self.dtype, "export.dtype")
    bd_export.check_reference_code(
        bd_export.check_format(self.format), self.reference_code
    )
