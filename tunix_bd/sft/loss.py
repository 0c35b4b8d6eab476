# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The masked-diffusion SFT loss hook for Tunix's `PeftTrainer`.

A micro-batch's loss is `sum(w * -log p(token))` over its corrupted
positions times `denominators.loss_scale` (docs/design.md "Loss
denominators"), from the model call's rows (`lm_head.Rows`): dense logits,
or with `logits_chunk` the head in vocabulary chunks ("Output head and
precision").
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import config_utils
from tunix_bd.core import bd_config
from tunix_bd.core import denominators
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import splash_attention
from tunix_bd.sft import micro_batches


def sft_model_inputs(
    batch: micro_batches.SftBatch,
) -> dict[str, micro_batches.SftBatch]:
  """The `gen_model_input_fn`: `{"batch": batch}`, the loss's keywords."""
  if not isinstance(batch, micro_batches.SftBatch):
    raise ValueError(
        f"the SFT loss needs an SftBatch, got {type(batch).__name__}; build"
        " batches with tunix_bd.sft.batching.sft_batches."
    )
  return {"batch": batch}


def sft_rows(
    model,
    *,
    tokens: jax.Array,
    noisy_tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    config: bd_config.BlockDiffusionConfig,
    logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
) -> lm_head.Rows:
  """`logits_fn`'s target-aligned rows of the canvases (`lm_head.Rows`);
  the clean-context layout sees the clean `tokens` as its context copy."""
  clean = tokens if config.layout == bd_config.CLEAN_CONTEXT else None
  return lm_head.as_rows(
      logits_fn(
          model,
          noisy_tokens,
          positions,
          segment_ids,
          config=config,
          clean_tokens=clean,
      )
  )


def bind_call(
    logits_fn: diffusion_lm.RowsFn,
    attention: str = splash_attention.DENSE,
    scan_layers: bool = False,
) -> diffusion_lm.RowsFn:
  """`logits_fn` with `attention` and `scan_layers` bound where they are
  not the defaults; fails closed on a call that takes neither (injected:
  they configure tunix_bd's own, `diffusion_rows`)."""
  splash_attention.check_attention(attention)
  if not isinstance(scan_layers, bool):
    raise ValueError(f"model.scan_layers must be a bool, got {scan_layers!r}.")
  if attention == splash_attention.DENSE and not scan_layers:
    return logits_fn
  parameters = inspect.signature(logits_fn).parameters
  if not {"attention", "scan_layers"} <= set(parameters):
    raise ValueError(
        "model.attention='splash' and model.scan_layers=True configure"
        " tunix_bd's own model call, so they cannot use an injected"
        " logits_fn; set attention='dense' and scan_layers=False."
    )
  return functools.partial(
      logits_fn, attention=attention, scan_layers=scan_layers
  )


def bucket_names(num_buckets: int) -> list[str]:
  """Aux names of the per-noise-level losses: `loss_t0.00-0.25`, ..."""
  edges = np.linspace(0.0, 1.0, num_buckets + 1)
  return [f"loss_t{lo:.2f}-{hi:.2f}" for lo, hi in zip(edges, edges[1:])]


def sft_loss(
    model,
    batch: micro_batches.SftBatch,
    *,
    config: bd_config.BlockDiffusionConfig,
    num_noise_buckets: int = 4,
    logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
    logits_chunk: int | None = None,
    attention: str = splash_attention.DENSE,
    scan_layers: bool = False,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Weighted masked-token cross-entropy of one micro-batch.

  Args:
    num_noise_buckets: loss buckets of equal width over noise levels [0, 1].
    logits_chunk: None computes dense logits of `logits_fn`'s rows; an int
      this many vocabulary columns at a time (`lm_head.token_stats`).
    attention, scan_layers: `dense` or `splash` attention, and the layers
      in one scan or Tunix's loop, for tunix_bd's own call (`bind_call`).

  Returns:
    `(loss, aux)`: `aux` holds totals over a step's micro-batches
    (`corrupted_tokens`, `total_weight`) and `[2]` `(numerator,
    denominator)` pairs: `weighted_loss`, `masked_accuracy` (argmax equals
    the target) and per noise-level bucket the mean unweighted
    cross-entropy (`bucket_names`).
  """
  tokens, segment_ids = batch.tokens, batch.segment_ids
  rows = sft_rows(
      model,
      tokens=tokens,
      noisy_tokens=batch.noisy_tokens,
      positions=batch.positions,
      segment_ids=segment_ids,
      config=config,
      logits_fn=bind_call(logits_fn, attention, scan_layers),
  )
  # Only log-probs of the targets: no `[batch, length, vocab]` one-hots.
  log_probs, predicted = lm_head.token_stats(rows, tokens, chunk=logits_chunk)
  supervised = batch.corruption_mask.astype(bool) & (segment_ids != 0)
  nll = jnp.where(supervised, -log_probs, 0.0)
  weights = jnp.where(supervised, batch.loss_weights.astype(jnp.float32), 0.0)
  weighted_sum = jnp.sum(weights * nll)

  loss = weighted_sum * denominators.loss_scale(
      batch.global_weight, batch.accumulation_steps
  )

  count = jnp.sum(supervised, dtype=jnp.float32)
  local_weight = jnp.sum(weights)
  correct = jnp.sum(supervised & (predicted == tokens), dtype=jnp.float32)
  aux = {
      "weighted_loss": jnp.stack([weighted_sum, local_weight]),
      "masked_accuracy": jnp.stack([correct, count]),
      "corrupted_tokens": count,
      "total_weight": local_weight,
  }
  bucket = jnp.clip(
      jnp.floor(batch.noise_level * num_noise_buckets).astype(jnp.int32),
      0,
      num_noise_buckets - 1,
  )
  for b, name in enumerate(bucket_names(num_noise_buckets)):
    in_bucket = supervised & (bucket == b)
    aux[name] = jnp.stack([
        jnp.sum(jnp.where(in_bucket, nll, 0.0)),
        jnp.sum(in_bucket, dtype=jnp.float32),
    ])
  return loss, jax.tree.map(jax.lax.stop_gradient, aux)


def sft_loss_fn(
    config: bd_config.BlockDiffusionConfig,
    *,
    num_noise_buckets: int = 4,
    logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
    logits_chunk: int | None = None,
    attention: str = splash_attention.DENSE,
    scan_layers: bool = False,
):
  """`sft_loss` bound to its settings: `loss_fn(model, batch) -> (loss,
  aux)` for `PeftTrainer.with_loss_fn`. Not a `functools.partial`:
  `nnx.value_and_grad` binds keywords to positions through the signature,
  which a partial hides.
  """
  if not isinstance(config, bd_config.BlockDiffusionConfig):
    raise ValueError(
        f"config must be a BlockDiffusionConfig, got {type(config).__name__}."
    )
  num_noise_buckets = config_utils.check_int(
      "num_noise_buckets", num_noise_buckets, 1
  )
  logits_chunk = lm_head.check_chunk(logits_chunk)
  bind_call(logits_fn, attention, scan_layers)

  def loss_fn(model, batch):
    return sft_loss(
        model,
        batch,
        config=config,
        num_noise_buckets=num_noise_buckets,
        logits_fn=logits_fn,
        logits_chunk=logits_chunk,
        attention=attention,
        scan_layers=scan_layers,
    )

  return loss_fn
