# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The masked-diffusion SFT loss hook for Tunix's `PeftTrainer`.

`configure` plugs the loss (`sft_loss_fn`) into any `PeftTrainer` through
its public seams, `with_gen_model_input_fn` and `with_loss_fn(...,
has_aux=True)`. `DiffusionSftTrainer` does the same, logs the aux metrics
(which Tunix 0.1.7's `PeftTrainer` drops) and stores the run's fingerprint
in every checkpoint.

The loss of a micro-batch is

    k * sum(w * -log p(token)) / global_weight

over its corrupted positions, with float32 target-aligned logits from
`diffusion_logits_fn`, `w` the loss weights, `global_weight` the total
weight of the whole global batch and k its number of micro-batches. Tunix
0.1.7's `optax.MultiSteps` averages the k micro-batch gradients, so the
update is exactly that of one big batch (DESIGN.md "Loss denominators").
Eval batches carry k = 1 and their own total, so the same function gives
their weighted mean.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.sft import batching

# The batch fields the loss reads.
LOSS_INPUTS = (
    "tokens",
    "noisy_tokens",
    "positions",
    "segment_ids",
    "corruption_mask",
    "loss_weights",
    "noise_level",
    batching.GLOBAL_WEIGHT,
    batching.ACCUMULATION_STEPS,
)


def sft_model_inputs(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  """The `gen_model_input_fn`: the loss kwargs from an SFT micro-batch.

  Args:
    batch: a micro-batch of `batching.BATCH_FIELDS`.

  Returns:
    The `LOSS_INPUTS` fields.

  Raises:
    ValueError: naming the fields the batch lacks.
  """
  missing = [key for key in LOSS_INPUTS if key not in batch]
  if missing:
    raise ValueError(
        f"the SFT batch lacks {missing}; build it with"
        " tunix_bd.sft.batching.sft_batches."
    )
  return {key: batch[key] for key in LOSS_INPUTS}


def sft_logits(
    model,
    *,
    tokens: jax.Array,
    noisy_tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    config: bd_config.BlockDiffusionConfig,
) -> jax.Array:
  """float32 `[batch, length, vocab]` target-aligned logits of the canvases.

  The clean-context layout sees the clean `tokens` as its context copy.
  """
  clean = tokens if config.layout == bd_config.CLEAN_CONTEXT else None
  return diffusion_lm.diffusion_logits_fn(
      model,
      noisy_tokens,
      positions,
      segment_ids,
      config=config,
      clean_tokens=clean,
  )


def bucket_names(num_buckets: int) -> list[str]:
  """Aux names of the per-noise-level losses: `loss_t0.00-0.25`, ..."""
  edges = np.linspace(0.0, 1.0, num_buckets + 1)
  return [f"loss_t{lo:.2f}-{hi:.2f}" for lo, hi in zip(edges, edges[1:])]


def sft_loss(
    model,
    tokens: jax.Array,
    noisy_tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    corruption_mask: jax.Array,
    loss_weights: jax.Array,
    noise_level: jax.Array,
    global_weight: jax.Array,
    accumulation_steps: jax.Array,
    config: bd_config.BlockDiffusionConfig,
    num_noise_buckets: int = 4,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Weighted masked-token cross-entropy of one micro-batch.

  Args:
    model: a Tunix decoder (see `diffusion_logits_fn`).
    tokens: int `[batch, length]` clean canvases (the targets).
    noisy_tokens: int `[batch, length]` corrupted canvases.
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad.
    corruption_mask: bool `[batch, length]`, the supervised positions.
    loss_weights: float `[batch, length]` weights of corrupted positions.
    noise_level: float `[batch, length]` noise level of each block.
    global_weight: float `[batch]` total weight of the global batch.
    accumulation_steps: int `[batch]` micro-batches per global batch.
    config: the block-diffusion settings (static).
    num_noise_buckets: loss buckets of equal width over noise levels [0, 1].

  Returns:
    `(loss, aux)`. `aux` values are scalars, totals that add up over the
    micro-batches of a step (`corrupted_tokens`, `total_weight`), or `[2]`
    `(numerator, denominator)` pairs whose step value is sum / sum:
    `weighted_loss`, `masked_accuracy` (argmax equals the target) and, per
    bucket of noise level, the mean unweighted cross-entropy
    (`bucket_names`).
  """
  logits = sft_logits(
      model,
      tokens=tokens,
      noisy_tokens=noisy_tokens,
      positions=positions,
      segment_ids=segment_ids,
      config=config,
  )
  # Only log-probs of the targets: no `[batch, length, vocab]` one-hots.
  log_probs = diffusion_lm.token_log_probs(logits, tokens)
  supervised = corruption_mask.astype(bool) & (segment_ids != 0)
  nll = jnp.where(supervised, -log_probs, 0.0)
  weights = jnp.where(supervised, loss_weights.astype(jnp.float32), 0.0)
  weighted_sum = jnp.sum(weights * nll)

  # Every row of a micro-batch carries the same values; max is exact.
  denominator = jnp.max(global_weight).astype(jnp.float32)
  k = jnp.max(accumulation_steps).astype(jnp.float32)
  scale = jnp.where(denominator > 0, k / jnp.maximum(denominator, 1e-30), 0.0)
  loss = weighted_sum * scale

  count = jnp.sum(supervised, dtype=jnp.float32)
  local_weight = jnp.sum(weights)
  correct = jnp.sum(
      supervised & (jnp.argmax(logits, axis=-1) == tokens), dtype=jnp.float32
  )
  aux = {
      "weighted_loss": jnp.stack([weighted_sum, local_weight]),
      "masked_accuracy": jnp.stack([correct, count]),
      "corrupted_tokens": count,
      "total_weight": local_weight,
  }
  bucket = jnp.clip(
      jnp.floor(noise_level * num_noise_buckets).astype(jnp.int32),
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
    config: bd_config.BlockDiffusionConfig, *, num_noise_buckets: int = 4
):
  """`sft_loss` bound to its settings, ready for `PeftTrainer.with_loss_fn`.

  Use this rather than `functools.partial(sft_loss, config=...)`:
  `nnx.value_and_grad` binds the loss kwargs to positions through the
  function's signature, which a partial hides ("keyword arguments could not
  be resolved to positions").

  Args:
    config: the block-diffusion settings.
    num_noise_buckets: see `sft_loss`.

  Returns:
    `loss_fn(model, tokens, ..., accumulation_steps) -> (loss, aux)` taking
    the `LOSS_INPUTS` fields.

  Raises:
    ValueError: for a config of the wrong type or a bucket count < 1.
  """
  if not isinstance(config, bd_config.BlockDiffusionConfig):
    raise ValueError(
        f"config must be a BlockDiffusionConfig, got {type(config).__name__}."
    )
  if (
      isinstance(num_noise_buckets, bool)
      or not isinstance(num_noise_buckets, int)
      or num_noise_buckets < 1
  ):
    raise ValueError(
        f"num_noise_buckets must be an int >= 1, got {num_noise_buckets!r}."
    )

  def loss_fn(
      model,
      tokens,
      noisy_tokens,
      positions,
      segment_ids,
      corruption_mask,
      loss_weights,
      noise_level,
      global_weight,
      accumulation_steps,
  ):
    return sft_loss(
        model,
        tokens,
        noisy_tokens,
        positions,
        segment_ids,
        corruption_mask,
        loss_weights,
        noise_level,
        global_weight,
        accumulation_steps,
        config=config,
        num_noise_buckets=num_noise_buckets,
    )

  return loss_fn


def configure(
    trainer: compat.PeftTrainer,
    config: bd_config.BlockDiffusionConfig,
    *,
    num_noise_buckets: int = 4,
) -> compat.PeftTrainer:
  """Makes a `PeftTrainer` train (and evaluate) with the SFT loss.

  A plain `PeftTrainer` does not log the aux metrics; `DiffusionSftTrainer`
  does.

  Args:
    trainer: the trainer to configure.
    config: the block-diffusion settings.
    num_noise_buckets: see `sft_loss`.

  Returns:
    The trainer.

  Raises:
    ValueError: for a config of the wrong type or a bucket count < 1.
  """
  loss_fn = sft_loss_fn(config, num_noise_buckets=num_noise_buckets)
  trainer.with_gen_model_input_fn(sft_model_inputs)
  trainer.with_loss_fn(loss_fn, has_aux=True)
  return trainer


def _total(values: list[np.ndarray]) -> float:
  return float(np.sum(values, dtype=np.float64))


def _ratio(values: list[np.ndarray]) -> float | None:
  numerator, denominator = np.sum(np.stack(values), axis=0, dtype=np.float64)
  # An empty bucket has no value this step; None is not logged.
  return None if denominator == 0 else float(numerator / denominator)


class DiffusionSftTrainer(compat.PeftTrainer):
  """A `PeftTrainer` configured with the SFT loss that logs its aux metrics.

  Aux metrics are reduced over the micro-batches of each update step (and
  over the whole eval set at each evaluation): totals are summed, ratios
  are sum(numerator) / sum(denominator), so they describe the global batch
  exactly. They are logged through `metrics_logger` under the trainer's
  metrics prefix, like `loss`.
  """

  def __init__(
      self,
      model,
      optimizer,
      training_config: compat.TrainingConfig,
      *,
      config: bd_config.BlockDiffusionConfig,
      fingerprint: Mapping[str, Any] | None = None,
      num_noise_buckets: int = 4,
      metrics_logger=None,
  ):
    """Builds the trainer.

    Args:
      model: the model to train.
      optimizer: an optax optimizer (Tunix wraps it in `MultiSteps` when
        `training_config.gradient_accumulation_steps` is set).
      training_config: Tunix's training config.
      config: the block-diffusion settings.
      fingerprint: a `tunix_bd.fingerprint.fingerprint(...)` dict stored in
        every checkpoint's metadata; None stores nothing.
      num_noise_buckets: see `sft_loss`.
      metrics_logger: Tunix's metrics logger; None builds one from
        `training_config.metrics_logging_options`.
    """
    self._fingerprint = None if fingerprint is None else dict(fingerprint)
    super().__init__(model, optimizer, training_config, metrics_logger)
    configure(self, config, num_noise_buckets=num_noise_buckets)

  def custom_checkpoint_metadata(self) -> dict[str, Any]:
    if self._fingerprint is None:
      return {}
    return {fingerprint_lib.METADATA_KEY: self._fingerprint}

  def _prepare_inputs(self, input_data: Any) -> Any:
    if not isinstance(input_data, Mapping):
      raise ValueError(
          "DiffusionSftTrainer expects dict batches from"
          f" tunix_bd.sft.batching, got {type(input_data).__name__}."
      )
    sft_model_inputs(input_data)  # Fails closed on missing fields.
    if self._mode == "train":
      # A batch split for another k would scale every gradient wrongly.
      expected = self.config.get_with_default("gradient_accumulation_steps", 1)
      steps = np.asarray(input_data[batching.ACCUMULATION_STEPS])
      if (steps != expected).any():
        raise ValueError(
            f"the training batch was split into {np.unique(steps).tolist()}"
            " micro-batches per update, but the trainer has"
            f" gradient_accumulation_steps={expected}; build the batches"
            " with the same gradient_accumulation_steps."
        )
    return input_data

  def _buffer_aux(self, buffer, aux: Mapping[str, jax.Array] | None) -> None:
    if buffer is None or not aux:
      return
    for name, value in aux.items():
      entry = buffer.additional_metrics.get(name)
      if entry is None:
        op = _total if jnp.ndim(value) == 0 else _ratio
        buffer.additional_metrics[name] = ([value], op)
      else:
        entry[0].append(value)

  def _post_process_train_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_train_metrics, aux)

  def _post_process_eval_step(self, aux: Any) -> None:
    self._buffer_aux(self._buffered_eval_metrics, aux)

  def _log_metrics(self, loss, step=None, additional_metrics=None):
    additional_metrics = {
        k: v for k, v in (additional_metrics or {}).items() if v is not None
    }
    super()._log_metrics(loss, step, additional_metrics)
