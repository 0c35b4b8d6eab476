# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""LoRA through Tunix's `nnx.LoRAParam` path (qwix), and merging for export.

`apply_lora` wraps a Tunix decoder's projections with qwix adapters, which
alone Tunix's `PeftTrainer` trains and checkpoints; `merge_lora` folds them
back (`W + A @ B * alpha / rank`), so a LoRA run exports as a full
fine-tune. `apply` and `merge` do either as SFT's `lora` section says.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from flax import nnx
import jax
import numpy as np
import qwix

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import families
from tunix_bd.core import rng

# Every attention and MLP projection of a Tunix Qwen3 (or Qwen2) layer.
DEFAULT_MODULE_PATH = (
    ".*(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
)
_SUFFIX_A, _SUFFIX_B = "_lora_a", "_lora_b"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoraSettings:
  """SFT's `lora`: rank 0 fine-tunes every weight; > 0 trains adapters."""

  SECTION: ClassVar[str] = "lora"

  rank: int = 0
  alpha: float = 16.0
  module_path: str = DEFAULT_MODULE_PATH

  def __post_init__(self):
    config_utils.check_int("lora.rank", self.rank, 0)
    config_utils.check_number("lora.alpha", self.alpha, 0, strict=True)


def apply(settings: LoraSettings, model: Any, *, seed: int, mesh: Any) -> Any:
  """`model` with the adapters `settings` asks for (rank > 0), or as it is."""
  if not settings.rank:
    return model
  with mesh_lib.tunix_context(mesh):
    return apply_lora(
        model,
        rank=settings.rank,
        alpha=settings.alpha,
        module_path=settings.module_path,
        seed=seed,
        mesh=mesh,
    )


def merge(settings: LoraSettings, model: Any, model_config: Any) -> Any:
  """`apply`'s model with its adapters merged into the weights, for export."""
  if not settings.rank:
    return model
  return merge_lora(model, model_config, alpha=settings.alpha)


def apply_lora(
    model: nnx.Module,
    *,
    rank: int,
    alpha: float,
    module_path: str = DEFAULT_MODULE_PATH,
    seed: int = 0,
    mesh: jax.sharding.Mesh | None = None,
) -> nnx.Module:
  """`model` with LoRA adapters on the modules matching `module_path`;
  `rank` >= 1 and `alpha` > 0 are checked by `LoraSettings`."""
  provider = qwix.LoraProvider(
      module_path=module_path, rank=rank, alpha=float(alpha)
  )
  lora_model = qwix.apply_lora_to_model(
      model, provider, rngs=rng.rngs(seed), **model.get_model_input()
  )
  if not nnx.state(lora_model, nnx.LoRAParam):
    raise ValueError(
        f"lora.module_path={module_path!r} matches no module of the model."
    )
  if mesh is not None:
    state = nnx.state(lora_model)
    nnx.update(
        lora_model,
        jax.device_put(state, nnx.get_named_sharding(state, mesh)),
    )
  return lora_model


def merge_lora(
    lora_model: nnx.Module, config: Any, *, alpha: float
) -> nnx.Module:
  """A plain model of `config`'s class whose weights are `apply_lora`'s
  model's, adapters folded in (`alpha` as built; the rank is read from A)."""
  model_class = families.model_class(config)
  merged = nnx.eval_shape(lambda: model_class(config, rngs=rng.rngs(0)))
  for path, param in nnx.iter_graph(merged):
    if not isinstance(param, nnx.Param):
      continue
    owner, name = lora_model, path[-1]
    for key in path[:-1]:
      owner = owner[key] if isinstance(key, int) else getattr(owner, key)
    value = np.asarray(jax.device_get(getattr(owner, name)[...]))
    lora_a = getattr(owner, name + _SUFFIX_A, None)
    if lora_a is not None:
      a = np.asarray(jax.device_get(lora_a[...]), np.float32)
      b = np.asarray(
          jax.device_get(getattr(owner, name + _SUFFIX_B)[...]), np.float32
      )
      rank = a.shape[-1]
      # qwix's A holds the input dims then the rank; B the rank, then the
      # output dims, so their product flattens to the weight's shape.
      delta = (a.reshape(-1, rank) @ b.reshape(rank, -1)) * (alpha / rank)
      value = (value.astype(np.float32) + delta.reshape(value.shape)).astype(
          value.dtype
      )
    param.set_value(jax.numpy.asarray(value))
  return merged
