# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's SFT through Tunix's own diffusion contract (`tunix.diffusion`).

Tunix's `configure_diffusion_sft(trainer, batch_adapter, logits_fn)` trains
any model given two callables, tunix_bd's `logits_fn` and `batch_adapter`
(docs/design.md "Tunix's diffusion contract"). `logits_fn` needs no Tunix;
the others raise a `ValueError` on a Tunix without the contract.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import lm_head
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import micro_batches

# The keys of `DiffusionTokenBatch.model_inputs`: each `[batch, length]`,
# named as `diffusion_lm.diffusion_logits_fn`'s arguments. `tokens` is the
# corrupted canvas the model reads; `clean_tokens` its clean copy (the
# context of the `clean_context` layout, unused by `single_canvas`).
MODEL_INPUTS = ("tokens", "positions", "segment_ids", "clean_tokens")
_SFT_NEEDS = (
    "Tunix's diffusion SFT adapter (tunix.sft.diffusion: Tunix main with PR"
    " #1891, 0.1.8.dev20260822 or later, or the first release after 0.1.7)"
)


def require(what: str, module: Any = compat.tunix_sft_diffusion) -> Any:
  """`module` (Tunix's diffusion SFT by default), or a ValueError naming
  `what` and the Tunix it needs where the installed Tunix lacks it."""
  if module is None:
    raise ValueError(
        f"{what} needs {_SFT_NEEDS}; the installed"
        f" google-tunix {compat.TUNIX_VERSION} has none."
    )
  return module


def logits_fn(config: bd_config.BlockDiffusionConfig):
  """tunix_bd's model call as a Tunix `DiffusionLogitsFn`.

  `fn(model, model_inputs)`: float32 `[batch, length, vocab]` target-aligned
  logits of `model_inputs` (`MODEL_INPUTS`) as `batch_adapter` builds them.
  """

  def diffusion_logits(model, model_inputs: dict[str, jax.Array]):
    rows = loss_lib.sft_rows(
        model,
        tokens=model_inputs["clean_tokens"],
        noisy_tokens=model_inputs["tokens"],
        positions=model_inputs["positions"],
        segment_ids=model_inputs["segment_ids"],
        config=config,
    )
    return lm_head.dense_logits(rows)

  return diffusion_logits


def batch_adapter(batch: micro_batches.SftBatch):
  """An SFT micro-batch as Tunix's `DiffusionTokenBatch` (traced, inside
  Tunix's jitted step): `target_ids` the clean tokens, `loss_weights`
  float32 `[batch, length]` the SFT loss's (0 off corrupted real slots).
  """
  contract = require("batch_adapter", compat.tunix_diffusion)
  loss_lib.sft_model_inputs(batch)  # Fails closed on another type.
  supervised = jnp.asarray(batch.corruption_mask, bool) & (
      jnp.asarray(batch.segment_ids) != 0
  )
  return contract.DiffusionTokenBatch.create(
      model_inputs={
          "tokens": batch.noisy_tokens,
          "positions": batch.positions,
          "segment_ids": batch.segment_ids,
          "clean_tokens": batch.tokens,
      },
      target_ids=batch.tokens,
      loss_weights=jnp.where(
          supervised, jnp.asarray(batch.loss_weights, jnp.float32), 0.0
      ),
  )


def configure(
    trainer: compat.PeftTrainer, config: bd_config.BlockDiffusionConfig
) -> compat.PeftTrainer:
  """Makes `trainer` (fed `SftBatch`es; returned) train and evaluate with
  Tunix's diffusion SFT loss."""
  sft = require("tunix_diffusion.configure")
  return sft.configure_diffusion_sft(trainer, batch_adapter, logits_fn(config))
