# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The Tunix decoder families the block-diffusion contract runs on.

A family fits when its forward is `model(tokens, positions, kv_cache,
attention_mask) -> (logits, kv_cache)` with a dense attention path that
honours the mask, and its KV cache is a dict of per-layer `{k, v,
end_index}` (what `cached_logits` rewinds): Qwen3, Qwen2 and Llama 3. Any
other model, or a `rope_theta` the family's attention does not apply
(`compat.ROPE_THETA_APPLIED`), fails closed. A Hugging Face Llama loads as
Qwen2, which applies any theta (`models.hf_config.LLAMA`).
"""

from __future__ import annotations

from typing import Any

from tunix.models.llama3 import model as llama3_lib
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd import compat
from tunix_bd import config_utils

# Family name -> its Tunix module and the model class it defines.
_MODULES = {
    "qwen3": (qwen3_lib, qwen3_lib.Qwen3),
    "qwen2": (qwen2_lib, qwen2_lib.Qwen2),
    "llama3": (llama3_lib, llama3_lib.Llama3),
}
# Family name -> the Tunix model config class that identifies it.
FAMILIES = {name: lib.ModelConfig for name, (lib, _) in _MODULES.items()}
# Family name -> the Tunix model class of that config.
MODEL_CLASSES = {name: cls for name, (_, cls) in _MODULES.items()}
# Family name -> how messages name it.
_LABELS = {"qwen3": "Qwen3", "qwen2": "Qwen2", "llama3": "Llama 3"}
# `model.remat` values: the members of every family's `RematConfig`.
REMAT_MODES = ("none", "block", "decoder")


def family(model_config: Any) -> str:
  """The family of a Tunix model config that computes what it says."""
  for name, config_type in FAMILIES.items():
    if isinstance(model_config, config_type):
      _check_rope_theta(name, model_config.rope_theta)
      return name
  raise ValueError(
      f"model config {type(model_config).__module__}."
      f"{type(model_config).__name__} is not a supported Tunix decoder; the"
      f" block-diffusion contract supports the families {sorted(FAMILIES)}"
      " (tunix.models.qwen3, qwen2, llama3)."
  )


def model_class(model_config: Any) -> type[Any]:
  """The Tunix model class that `model_config` builds (e.g. `Qwen2`)."""
  return MODEL_CLASSES[family(model_config)]


def remat_config(model_config: Any, mode: str) -> Any:
  """The family's own `RematConfig` member named `mode` (`REMAT_MODES`)."""
  config_utils.check_choice("model.remat", mode, REMAT_MODES)
  # Each family defines its own `RematConfig` enum.
  return _MODULES[family(model_config)][0].RematConfig[mode.upper()]


def _check_rope_theta(name: str, rope_theta: Any) -> None:
  """Refuses a theta that the family's attention does not rotate with."""
  applied = compat.ROPE_THETA_APPLIED[name]
  if applied is None or rope_theta == applied:
    return
  # Nothing short of forking Tunix's attention rotates with another base:
  # pair i of each head turns by position * theta**(-2i / head_dim), so
  # another theta rescales each pair's frequency by a different factor,
  # which no change of positions does, and the rotation acts on q and k
  # after every weight, so no change of weights does either.
  hint = ""
  if name == "llama3":
    hint = (
        " A Hugging Face Llama checkpoint loads exactly at its own theta"
        " through tunix_bd's loader, as Tunix's Qwen2 with zero q/k/v biases."
    )
  raise ValueError(
      f"model rope_theta={rope_theta!r} is not supported: Tunix's"
      f" {_LABELS[name]} attention always rotates with theta {applied} (it"
      " ignores ModelConfig.rope_theta; google-tunix 0.1.7 and main), so"
      " this model would compute another function than its checkpoint or"
      f" config describes; only rope_theta={applied} is exact.{hint}"
  )
