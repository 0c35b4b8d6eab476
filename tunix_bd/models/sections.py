# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The recipes' `model` sections, SFT's `bd`, and `export`.

Each dataclass is one config section and the source of its defaults
(`config_utils`); a recipe's `model` composes `precision.Precision` and
`RandomInit`. `directory_hint` says what to set when a checkpoint directory
is missing (`run.provenance`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tunix_bd import config_utils
from tunix_bd.core import bd_config
from tunix_bd.core import splash_attention
from tunix_bd.models import bd_export
from tunix_bd.models import export as export_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import precision

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
class BlockSize:
  """A `bd` of `block_size` (tokens per block) alone: `bench_sft`'s."""

  SECTION: ClassVar[str] = "bd"

  block_size: int = 8

  def __post_init__(self):
    config_utils.check_int(f"{self.SECTION}.block_size", self.block_size, 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScratchBd(BlockSize):
  """`model.scratch_bd`: a random converted model's block-diffusion
  settings: `alignment` (`shifted` or `same_position`) and `layout`
  (`clean_context` or `single_canvas`); its tokenizer has the mask token."""

  SECTION: ClassVar[str] = "model.scratch_bd"

  alignment: str = bd_config.SHIFTED
  layout: str = bd_config.CLEAN_CONTEXT

  def __post_init__(self):
    super().__post_init__()
    key = f"{self.SECTION}."
    config_utils.check_choice(
        key + "alignment", self.alignment, bd_config.ALIGNMENTS
    )
    config_utils.check_choice(key + "layout", self.layout, bd_config.LAYOUTS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bd(ScratchBd):
  """SFT's `bd`, what the AR model is converted to; its `mask_token` is a
  token of the tokenizer, a reserved id, or a new token that is added
  (growing the embedding) when the tokenizer lacks it."""

  SECTION: ClassVar[str] = "bd"

  mask_token: str = "<|mask|>"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomInit:
  """A `model` that may be random instead of its checkpoints: with
  `random_init` (smoke runs), one of the `scratch` shape with the embedded
  tokenizer and the `scratch_bd` settings."""

  SECTION: ClassVar[str] = "model"

  random_init: bool = False
  scratch: from_scratch.ScratchModelSettings = dataclasses.field(
      default_factory=from_scratch.ScratchModelSettings
  )
  scratch_bd: ScratchBd = dataclasses.field(default_factory=ScratchBd)

  def __post_init__(self):
    config_utils.check_bool(f"{self.SECTION}.random_init", self.random_init)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SftModel(precision.LossPrecision):
  """SFT's `model`: the AR checkpoint to convert (an HF Qwen3 or Qwen2
  directory with its tokenizer) and how it computes (docs/real_models.md,
  "Precision and memory"). `sft_loss` is `tunix_bd`'s loss hook
  (`sft.loss`) or `tunix`'s diffusion SFT adapter (`sft.tunix_diffusion`:
  dense logits, no aux metrics); equal losses, so resumable."""

  checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/ar_pretrain/export", required=True
  )
  sft_loss: str = config_utils.resumable(default=HOOK_SFT_LOSS)
  attention: str = config_utils.resumable(default=splash_attention.DENSE)
  scan_layers: bool = config_utils.resumable(default=False)

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_choice("model.sft_loss", self.sft_loss, SFT_LOSSES)
    splash_attention.check_attention(self.attention)
    config_utils.check_bool("model.scan_layers", self.scan_layers)
    if (
        self.attention == splash_attention.SPLASH
        and self.sft_loss != HOOK_SFT_LOSS
    ):
      raise ValueError(
          f"model.attention={self.attention!r} runs in tunix_bd's loss hook;"
          f" set model.sft_loss={HOOK_SFT_LOSS!r}."
      )

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (`run.provenance`)."""
    if not getattr(self, key):
      return (
          ": set --config.model.checkpoint=DIR to a Hugging Face Qwen3 or"
          " Qwen2 checkpoint directory (its config.json, weights and"
          " tokenizer)."
      )
    return (
        ". On the embedded default, train the AR teacher first (`tunix run"
        " --plugin tunix_bd ar_pretrain.py`); otherwise point it at an HF"
        " Qwen3 or Qwen2 directory."
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpdModel(precision.LossPrecision, RandomInit):
  """OPD's `model`: the converted `student` and the causal AR `teacher`
  (one tokenizer), or a random model."""

  student: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  teacher: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )

  def __post_init__(self):
    precision.LossPrecision.__post_init__(self)
    RandomInit.__post_init__(self)

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (`run.provenance`)."""
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class GrpoModel(precision.LossPrecision, RandomInit):
  """GRPO's `model`, or a random model.

  Attributes:
    checkpoint: the policy, a converted model.
    reference: the frozen KL reference, of the policy's block settings and
      tokenizer; empty: the initial policy (as Tunix, TRL and verl; with
      `random_init`, a copy of the random policy).
    continued_sft: optional, another converted model evaluated beside the
      policy (the report's `continued SFT`); a resume may change it.
  """

  checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  reference: str = config_utils.source(_CHECKPOINT)
  continued_sft: str = config_utils.source(
      _CHECKPOINT, metadata={config_utils.RESUMABLE: True}
  )

  def __post_init__(self):
    precision.LossPrecision.__post_init__(self)
    RandomInit.__post_init__(self)
    if not self.reference and not self.random_init:
      # Named, so that the fingerprint holds the reference's digest.
      object.__setattr__(self, "reference", self.checkpoint)

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (`run.provenance`)."""
    if key != "checkpoint":
      return ""
    return (
        ": it must be a converted model directory; on the embedded default"
        f" {RUN_THE_QUICKSTART}"
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeModel(precision.Precision):
  """Generate's `model`: the converted model to decode (`sft.py`'s
  `export/`, or an SDAR or Fast-dLLM v2 directory), at `dtype` and `remat`."""

  checkpoint: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (`run.provenance`)."""
    del key  # `checkpoint`, its one.
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareModel(precision.Precision):
  """Compare's `model`: an AR model `ar` and its conversion `bd`, both
  decoded at `dtype` (matrices stored in it) and `remat`; `scan_layers`
  compiles one layer for our loop and block diffusion
  (`denoise.DenoiseConfig.scan_layers`: the same tokens)."""

  ar: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/ar_pretrain/export", required=True
  )
  bd: str = config_utils.source(
      _CHECKPOINT, "runs/quickstart/sft/export", required=True
  )
  scan_layers: bool = False

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_bool(f"{self.SECTION}.scan_layers", self.scan_layers)

  def directory_hint(self, key: str) -> str:
    """What to set when checkpoint `key` is missing (`run.provenance`)."""
    del key  # The quickstart makes both.
    return (
        "; the quickstart writes runs/quickstart/ar_pretrain/export (AR) and"
        " runs/quickstart/sft/export (its conversion)."
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportSettings:
  """The `export` section of a recipe that writes an HF export: the weight
  `dtype` (empty: the source's), `format` and `reference_code`
  (docs/formats.md, "Export")."""

  SECTION: ClassVar[str] = "export"

  # What is written at the end, never what the checkpoints mean.
  dtype: str = config_utils.resumable(default="")
  format: str = config_utils.resumable(default=bd_export.TUNIX_BD)
  reference_code: str = config_utils.resumable(default="")

  def __post_init__(self):
    hf_checkpoint.check_export_dtype(self.dtype, "export.dtype")
    bd_export.check_reference_code(
        bd_export.check_format(self.format), self.reference_code
    )
