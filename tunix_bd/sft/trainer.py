# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionSftTrainer`: a `PeftTrainer` with the SFT loss and its metrics.

It plugs the loss in (`loss.sft_loss_fn`), logs the aux metrics (which
Tunix 0.1.7's `PeftTrainer` drops), donates the weights to the train step,
checks that batches were split for its gradient accumulation, and stores
the run's fingerprint in every checkpoint. `report_conversion` is the run's
last line: its final losses and what it exported.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import splash_attention
from tunix_bd.sft import loss as loss_lib
from tunix_bd.training import aux_metrics
from tunix_bd.training import donation
from tunix_bd.training import metrics


class DiffusionSftTrainer(
    aux_metrics.AuxMetricsMixin,
    donation.DonatingStepMixin,
    compat.PeftTrainer,
):
  """A `PeftTrainer` configured with the SFT loss (see the module doc)."""

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
      logits_fn: diffusion_lm.LogitsFn = diffusion_lm.diffusion_logits_fn,
      logits_chunk: int | None = None,
      attention: str = splash_attention.DENSE,
  ):
    """Builds the trainer; the loss keywords are `loss.sft_loss`'.

    `fingerprint` (`tunix_bd.fingerprint.fingerprint(...)`) is stored in
    every checkpoint's metadata; None stores nothing. A head or model the
    chunked head or Splash attention cannot run fails here.
    """
    if logits_chunk:
      # Fails closed before any step: chunks cannot apply a LoRA'd head.
      lm_head.model_head(model, config.mask_token_id)
    if splash_attention.check_attention(attention) == splash_attention.SPLASH:
      splash_attention.check_model(model)
    self._set_fingerprint(fingerprint)
    super().__init__(model, optimizer, training_config, metrics_logger)
    self.with_gen_model_input_fn(loss_lib.sft_model_inputs)
    loss_fn = loss_lib.sft_loss_fn(
        config,
        num_noise_buckets=num_noise_buckets,
        logits_fn=logits_fn,
        logits_chunk=logits_chunk,
        attention=attention,
    )
    self.with_loss_fn(loss_fn, has_aux=True)

  def _prepare_inputs(self, input_data: Any) -> Any:
    loss_lib.sft_model_inputs(input_data)  # Fails closed on another type.
    if self._mode == "train":
      # A batch split for another k would scale every gradient wrongly.
      expected = self.config.get_with_default("gradient_accumulation_steps", 1)
      steps = np.asarray(input_data.accumulation_steps)
      if (steps != expected).any():
        raise ValueError(
            f"the training batch was split into {np.unique(steps).tolist()}"
            " micro-batches per update, but the trainer has"
            f" gradient_accumulation_steps={expected}; build the batches"
            " with the same gradient_accumulation_steps."
        )
    return input_data


def report_conversion(
    workdir: str,
    export_dir: str,
    bd: bd_config.BlockDiffusionConfig,
    steps: int,
) -> dict[str, float]:
  """The converted run's final losses, printed with what it exported.

  Returns `{"train_loss", "eval_loss", "steps"}`: the last `/train/loss` and
  `/eval/loss` in `workdir`'s `metrics.jsonl` (NaN if never logged), and
  `steps` (the optimizer steps trained), for the model in `export_dir`.
  """

  def last(name):
    values = metrics.read_metrics(workdir, name)
    return values[-1][1] if values else float("nan")

  losses = {
      "train_loss": last("/train/loss"),
      "eval_loss": last("/eval/loss"),
      "steps": steps,
  }
  print(
      f"sft: exported the block-diffusion model to {export_dir} "
      f"(block_size={bd.block_size}, mask id {bd.mask_token_id}, "
      f"{bd.alignment}, {bd.layout}); final train loss "
      f"{losses['train_loss']:.4f}, eval loss {losses['eval_loss']:.4f}."
  )
  return losses
