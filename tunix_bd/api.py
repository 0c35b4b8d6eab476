# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The public Python API of tunix_bd: what code outside it may rely on.

    from tunix_bd import api

    generator = api.TextGenerator.from_checkpoint("runs/quickstart/sft/export")

Every name here keeps its meaning from release to release; everything else
in the package is internal and may move without notice. A public name is
removed or renamed only through a deprecation: for a release, the old name
still works and warns, naming the new one (`_DEPRECATED`).
`tunix_bd_tests/api_test.py` pins the list.

Names resolve when first used, so `import tunix_bd.api` loads no model,
RL or distillation code it does not need.
"""

from __future__ import annotations

import importlib
from typing import Any
import warnings

# Public name -> "module:attribute" that defines it.
_PUBLIC = {
    # The model contract (docs/design.md, "Semantics").
    "BlockDiffusionConfig": "tunix_bd.core.bd_config:BlockDiffusionConfig",
    "diffusion_logits_fn": "tunix_bd.core.diffusion_lm:diffusion_logits_fn",
    "diffusion_rows": "tunix_bd.core.diffusion_lm:diffusion_rows",
    "Trace": "tunix_bd.core.trace:Trace",
    "Replayer": "tunix_bd.core.replayer:Replayer",
    # Decoding.
    "DenoiseConfig": "tunix_bd.generate.denoise:DenoiseConfig",
    "Denoiser": "tunix_bd.generate.denoise:Denoiser",
    "TextGenerator": "tunix_bd.generate.text:TextGenerator",
    "load_model": "tunix_bd.generate.text:load_model",
    # Data and scoring.
    "TaskMix": "tunix_bd.data.tasks:TaskMix",
    "build_char_tokenizer": "tunix_bd.data.tokenizer:build_char_tokenizer",
    "embedded_conversations": "tunix_bd.data.dataset:embedded_conversations",
    "tokenize": "tunix_bd.data.dataset:tokenize",
    "exact_match": "tunix_bd.data.scoring:exact_match",
    "final_answer": "tunix_bd.data.scoring:final_answer",
    # Models.
    "ScratchModelSettings": "tunix_bd.models.from_scratch:ScratchModelSettings",
    "qwen3_config": "tunix_bd.models.from_scratch:qwen3_config",
    # Masked-diffusion SFT: tunix_bd's loss hook, or Tunix's own adapter.
    "SftCorruptionConfig": "tunix_bd.sft.corruption:SftCorruptionConfig",
    "sft_batches": "tunix_bd.sft.batching:sft_batches",
    "DiffusionSftTrainer": "tunix_bd.sft.trainer:DiffusionSftTrainer",
    "tunix_diffusion_logits_fn": "tunix_bd.sft.tunix_diffusion:logits_fn",
    "tunix_diffusion_batch_adapter": (
        "tunix_bd.sft.tunix_diffusion:batch_adapter"
    ),
    # On-policy distillation.
    "DiffusionOpdStrategy": (
        "tunix_bd.distillation.strategy:DiffusionOpdStrategy"
    ),
    "StudentRolloutSource": (
        "tunix_bd.distillation.sources:StudentRolloutSource"
    ),
    # GRPO / GSPO with exact trace replay.
    "DiffusionRollout": "tunix_bd.rl.rollout:DiffusionRollout",
    "DiffusionRLCluster": "tunix_bd.rl.cluster:DiffusionRLCluster",
    "DiffusionGRPOLearner": "tunix_bd.rl.learner:DiffusionGRPOLearner",
    "diffusion_grpo_loss": "tunix_bd.rl.policy_loss:diffusion_grpo_loss",
    "rebind_meshes": "tunix_bd.rl.role_shim:rebind_meshes",
}

# Deprecated public name -> the public name that replaces it. Each entry
# stays for one release, then goes.
_DEPRECATED: dict[str, str] = {}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
  if name in _DEPRECATED:
    new = _DEPRECATED[name]
    warnings.warn(
        f"tunix_bd.api.{name} is deprecated; use tunix_bd.api.{new}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return __getattr__(new)
  if name not in _PUBLIC:
    raise AttributeError(f"module 'tunix_bd.api' has no attribute {name!r}")
  module, attribute = _PUBLIC[name].split(":")
  value = getattr(importlib.import_module(module), attribute)
  globals()[name] = value  # Resolved once.
  return value


def __dir__() -> list[str]:
  return __all__
