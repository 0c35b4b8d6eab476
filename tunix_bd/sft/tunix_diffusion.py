# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""tunix_bd's SFT through Tunix's own diffusion contract (`tunix.diffusion`).

Tunix's diffusion SFT (`tunix.sft.diffusion.configure_diffusion_sft(trainer,
batch_adapter, logits_fn)`) trains any model given two callables; these are
tunix_bd's:

- `logits_fn(config)`: tunix_bd's model call as a Tunix `DiffusionLogitsFn`,
  `(model, model_inputs) -> float32 [batch, length, vocab]` target-aligned
  logits, the block-diffusion settings bound here.
- `batch_adapter(batch)`: a `DiffusionBatchAdapter` from an `SftBatch` to a
  `DiffusionTokenBatch` (`MODEL_INPUTS`, the clean tokens as targets, the
  SFT loss's weights).
- `configure(trainer, config)`: `configure_diffusion_sft` with both.

Tunix's trainer divides the summed `sum(w * nll)` by the summed weights:
the update of tunix_bd's hook (`sft.loss`), so `global_weight` and
`accumulation_steps` are not needed here; losses and gradients are equal to
float rounding (docs/design.md "Tunix's diffusion contract", which also says
why the hook stays the default).

`logits_fn` needs no Tunix; the others need a Tunix with the contract and
raise a `ValueError` naming it on google-tunix 0.1.7.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
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


def logits_fn(
    config: bd_config.BlockDiffusionConfig,
    model_call: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
):
  """tunix_bd's model call as a Tunix `DiffusionLogitsFn`.

  Args:
    config: the block-diffusion settings (static).
    model_call: the cache-free tunix_bd model call.

  Returns:
    `fn(model, model_inputs)`: float32 `[batch, length, vocab]` logits whose
    row i predicts the token at i, of `model_inputs` (`MODEL_INPUTS`, each
    `[batch, length]`) as `batch_adapter` builds them.
  """

  def diffusion_logits(model, model_inputs: dict[str, jax.Array]):
    return loss_lib.sft_logits(
        model,
        tokens=model_inputs["clean_tokens"],
        noisy_tokens=model_inputs["tokens"],
        positions=model_inputs["positions"],
        segment_ids=model_inputs["segment_ids"],
        config=config,
        logits_fn=model_call,
    )

  return diffusion_logits


def batch_adapter(batch: micro_batches.SftBatch):
  """An SFT micro-batch as Tunix's `DiffusionTokenBatch`.

  Runs inside Tunix's jitted step, so on traced arrays too.

  Returns:
    `DiffusionTokenBatch(model_inputs, target_ids, loss_weights)`:
    `model_inputs` a dict of `MODEL_INPUTS`, `target_ids` int32 `[batch,
    length]` the clean tokens, `loss_weights` float32 `[batch, length]` the
    SFT loss's weights (0 off the corrupted real positions).

  Raises:
    ValueError: for anything but an `SftBatch`, or on a Tunix without
      `tunix.diffusion`.
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
    trainer: compat.PeftTrainer,
    config: bd_config.BlockDiffusionConfig,
    model_call: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
) -> compat.PeftTrainer:
  """Makes `trainer` train (and evaluate) with Tunix's diffusion SFT loss.

  Args:
    trainer: a `PeftTrainer` fed `SftBatch`es; returned, as Tunix's
      `configure_diffusion_sft` returns it.
    config, model_call: as for `logits_fn`.

  Raises:
    ValueError: on a Tunix without `tunix.sft.diffusion`.
  """
  sft = require("tunix_diffusion.configure")
  return sft.configure_diffusion_sft(
      trainer, batch_adapter, logits_fn(config, model_call)
  )
