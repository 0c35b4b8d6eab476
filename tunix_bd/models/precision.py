# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Compute precision, rematerialization and the chunked head: `model.*` keys.

`model.dtype` (bf16 compute on float32 master weights), `model.remat`
(Tunix's `RematConfig`: `none`, `block`, `decoder`) and, for decoding, the
matrices stored in the compute dtype; docs/design.md "Output head and
precision" gives their rules.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar

from flax import nnx
import jax
import jax.numpy as jnp
from tunix_bd import config_utils
from tunix_bd.core import families
from tunix_bd.models import hf_checkpoint

DTYPES = ("float32", "bfloat16")
# Parameters (master weights) and optimizer state stay float32.
PARAM_DTYPE = "float32"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Precision:
  """How a model computes: `model.dtype` and `model.remat`, the group every
  `model` section of a recipe that builds a model has.

  Only `dtype` changes what a run computes; `remat` trades memory for time.
  """

  SECTION: ClassVar[str] = "model"

  dtype: str = "float32"
  remat: str = config_utils.resumable(default="none")

  def __post_init__(self):
    config_utils.check_choice(f"{self.SECTION}.dtype", self.dtype, DTYPES)
    config_utils.check_choice(
        f"{self.SECTION}.remat", self.remat, families.REMAT_MODES
    )

  def model_config(self, config: Any) -> Any:
    """A Tunix model config with this compute dtype and remat."""
    return dataclasses.replace(
        config,
        dtype=jnp.dtype(self.dtype),
        param_dtype=jnp.dtype(PARAM_DTYPE),
        remat_config=families.remat_config(config, self.remat),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LossPrecision(Precision):
  """`Precision` and `model.logits_chunk`: the head's chunk, for a model
  that computes a loss (0: dense logits). Equal losses: resumable."""

  logits_chunk: int = config_utils.resumable(default=8192)

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_int(f"{self.SECTION}.logits_chunk", self.logits_chunk, 0)

  @property
  def chunk(self) -> int | None:
    """`logits_chunk` as the losses take it: None for dense logits."""
    return self.logits_chunk or None

  def provenance(self) -> dict[str, Any]:
    """The settings as recorded beside a run's outputs (these alone, in a
    subclass too)."""
    return {f.name: getattr(self, f.name) for f in _FIELDS}


_FIELDS = dataclasses.fields(LossPrecision)


def matrices_to_compute_dtype(model: nnx.Module, dtype: Any) -> None:
  """Stores a decoding model's matrices in its compute dtype, in place.

  Tunix's layers cast every matrix to the compute dtype before use, so the
  logits are the same bit for bit and a bfloat16 forward reads half the
  bytes (on a TPU the per-call cast costs more than a small model's
  forward). Vectors keep theirs (RMSNorm computes in float32). Not for a
  model that trains: the optimizer updates float32 master weights.
  """
  dtype = jnp.dtype(dtype)
  params = nnx.state(model, nnx.Param)
  nnx.update(
      model,
      jax.tree.map(lambda x: x.astype(dtype) if x.ndim >= 2 else x, params),
  )


def load(
    checkpoint: str | os.PathLike[str],
    precision: Precision,
    *,
    mesh: jax.sharding.Mesh | None = None,
    decoding_only: bool = False,
):
  """`hf_checkpoint.load` at `precision`; with `decoding_only`, then
  `matrices_to_compute_dtype`."""
  model, config = hf_checkpoint.load(
      checkpoint,
      mesh=mesh,
      dtype=precision.dtype,
      param_dtype=PARAM_DTYPE,
      remat=precision.remat,
  )
  if decoding_only:
    matrices_to_compute_dtype(model, precision.dtype)
  return model, config
