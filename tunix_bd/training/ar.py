# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Plain AR SFT with Tunix's stock next-token loss: inputs and trainer.

`PeftTrainer`'s default loss takes `input_tokens`, `input_mask`, `positions`
and `attention_mask`; `ar_model_inputs` builds them from tunix_bd's
right-padded batches (`tunix_bd.data.dataset.batches`).
`FingerprintedTrainer` is Tunix's `PeftTrainer` whose checkpoints carry the
run fingerprint (`aux_metrics.AuxMetricsMixin`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tunix_bd import compat
from tunix_bd.core import masks
from tunix_bd.training import aux_metrics


class FingerprintedTrainer(aux_metrics.AuxMetricsMixin, compat.PeftTrainer):
  """`PeftTrainer` whose checkpoints carry the run's `fingerprint`."""


def ar_model_inputs(batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
  """Maps a right-padded batch to the inputs of Tunix's default AR loss.

  `batch` holds `tokens`, `completion_mask` and `valid_mask`, each `[batch,
  length]`, and may hold the `segment_ids` and `positions` of packed rows
  (each document from position 0, its first token prompt, so no target
  crosses documents).

  Returns:
    `input_tokens`, `input_mask` (the completion: Tunix's loss supervises
    `input_mask[:, 1:]`), `positions` and a causal `attention_mask`
    `[batch, length, length]` that keeps pads and other documents out.
  """
  tokens = batch["tokens"]
  positions = batch.get("positions")
  if positions is None:
    positions = jnp.broadcast_to(
        jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape
    )
  segment_ids = batch.get("segment_ids", batch["valid_mask"])
  segment_ids = jnp.asarray(segment_ids).astype(jnp.int32)
  # A block size of 1 is exactly the causal mask.
  mask = masks.block_causal_mask(
      positions,
      positions,
      1,
      q_segment_ids=segment_ids,
      kv_segment_ids=segment_ids,
  )
  return {
      "input_tokens": tokens,
      "input_mask": batch["completion_mask"],
      "positions": positions,
      "attention_mask": mask,
  }
