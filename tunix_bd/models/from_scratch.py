# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A randomly initialised Tunix Qwen3 (the embedded AR teacher, benchmarks):
its shape `ScratchModelSettings` (`model.scratch`), and `ArModelSettings`,
AR pretraining's `model` (the shape and its `precision.Precision`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from flax import nnx
import jax
from tunix.models.qwen3 import model as qwen3_lib

from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import families
from tunix_bd.core import rng
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import hf_config
from tunix_bd.models import precision as precision_lib


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScratchModelSettings:
  """The shape of a from-scratch Qwen3 (its vocabulary is the tokenizer's)."""

  SECTION: ClassVar[str] = "model.scratch"

  num_layers: int = 2
  embed_dim: int = 64
  hidden_dim: int = 256
  num_heads: int = 4
  head_dim: int = 16
  num_kv_heads: int = 2
  norm_eps: float = 1e-6
  tie_embeddings: bool = True

  def __post_init__(self):
    for field in dataclasses.fields(ScratchModelSettings):  # Not a subclass's.
      if field.type == "int":
        config_utils.check_int(
            f"{self.SECTION}.{field.name}", getattr(self, field.name), 1
        )
    if self.num_heads % self.num_kv_heads:
      raise ValueError(
          f"{self.SECTION}.num_heads={self.num_heads} must be a multiple of "
          f"{self.SECTION}.num_kv_heads={self.num_kv_heads}."
      )
    config_utils.check_bool(
        f"{self.SECTION}.tie_embeddings", self.tie_embeddings
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArModelSettings(ScratchModelSettings, precision_lib.Precision):
  """`ar_pretrain`'s model: the shape, and how it computes."""

  SECTION: ClassVar[str] = "model"

  def __post_init__(self):
    ScratchModelSettings.__post_init__(self)
    precision_lib.Precision.__post_init__(self)


# What smoke variants shrink a from-scratch model to: 1 layer, 32 wide.
TINY_SHAPE = dict(
    num_layers=1,
    embed_dim=32,
    hidden_dim=64,
    num_heads=2,
    head_dim=16,
    num_kv_heads=1,
)


def qwen3_config(
    settings: ScratchModelSettings, vocab_size: int
) -> qwen3_lib.ModelConfig:
  """The Tunix Qwen3 config of `settings` over a `vocab_size` vocabulary."""
  # `ModelConfig` fields but the tying (a subclass may add compute keys).
  shape = {
      f.name: getattr(settings, f.name)
      for f in dataclasses.fields(ScratchModelSettings)
  }
  tied = shape.pop("tie_embeddings")
  return qwen3_lib.ModelConfig(
      **shape,
      vocab_size=vocab_size,
      # Tunix's Qwen3 applies RoPE with a fixed theta of 1e6 whatever this
      # says, so the config states the value that is really used.
      rope_theta=hf_config.TUNIX_ROPE_THETA,
      use_tied_embedding=tied,
  )


def init_model(
    config: qwen3_lib.ModelConfig, seed: int, mesh: jax.sharding.Mesh
) -> qwen3_lib.Qwen3:
  """A randomly initialised Qwen3, sharded over `mesh`; a config the Tunix
  Qwen3 does not compute as written (`families`) fails before any build."""
  families.family(config)

  @nnx.jit
  def create():
    model = qwen3_lib.Qwen3(config, rngs=rng.rngs(seed))
    state = nnx.state(model)
    shardings = nnx.get_named_sharding(state, mesh)
    nnx.update(model, jax.lax.with_sharding_constraint(state, shardings))
    return model

  with mesh_lib.tunix_context(mesh):
    return create()


def embedded_config(section) -> qwen3_lib.ModelConfig:
  """The Qwen3 config of a `model.scratch` section over the embedded vocab."""
  settings = section
  if not isinstance(section, ScratchModelSettings):
    settings = config_utils.from_section(
        ScratchModelSettings, section, "model.scratch"
    )
  return qwen3_config(settings, tokenizer_lib.VOCAB_SIZE)


def embedded_model(section, seed: int, mesh: jax.sharding.Mesh, precision=None):
  """A random Qwen3 of a `model.scratch` section over the embedded vocab,
  at `precision` (a `precision.Precision`, or None)."""
  config = embedded_config(section)
  if precision is not None:
    config = precision.model_config(config)
  return init_model(config, seed, mesh)
