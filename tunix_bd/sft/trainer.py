# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionSftTrainer`: a `PeftTrainer` with the SFT loss and its metrics.

It plugs the loss in (`loss.sft_loss_fn`), logs the aux metrics, donates
the weights to the train step, checks that batches were split for its
gradient accumulation, and stores the run's fingerprint in every
checkpoint. `report_conversion` prints the run's final losses.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from flax import nnx
import jax
from jax.interpreters import pxla
import numpy as np

from tunix_bd import compat
from tunix_bd.core import bd_config
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import splash_attention
from tunix_bd.sft import loss as loss_lib
from tunix_bd.training import aux_metrics
from tunix_bd.training import metrics


class DonatingStepMixin:
  """Mixed in before a Tunix `PeftTrainer`: a train step that updates the
  weights in place.

  google-tunix 0.1.7's `PeftTrainer` jits its train step donating only the
  optimizer (old and new float32 weights coexist at the step's peak), its
  eval step without donation (a copy of the weights per evaluation), and
  places the optimizer state with an eager `with_sharding_constraint` (two
  copies of the AdamW moments). This mixin jits the same steps donating the
  model too (full fine-tuning only) and places the optimizer state with
  `jax.device_put`, which moves only leaves not already placed. Every step
  argument before `inputs` is the trainer's attribute of that name, bound
  and donated. On a Tunix shaped otherwise, Tunix's own methods run.
  """

  def donates_model(self) -> bool:
    """Whether the jitted train step updates the weights in place."""
    return (
        not self._lora_enabled
        and compat.train_step_state_args(self) is not None
    )

  def jit_train_and_eval_step(
      self, skip_jit: bool = False, cache_nnx_graph: bool = False
  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Tunix's train and eval step functions, both donating the model (the
    train step the optimizer too) when `donates_model`."""
    if skip_jit or not self.donates_model():
      return super().jit_train_and_eval_step(skip_jit, cache_nnx_graph)
    if self._jitted_train_step_fn is None:
      self._shard_optimizer(pxla.thread_resources.env.physical_mesh)
      state = compat.train_step_state_args(self)
      train_step = nnx.jit(self.create_train_step_fn(), donate_argnames=state)
      # nnx.jit returns the model's state: undonated, a copy of the weights.
      eval_step = nnx.jit(self.create_eval_step_fn(), donate_argnames="model")

      def bind(f, *args):
        if cache_nnx_graph:
          # As Tunix: a partial of the cached partial, so that the jitted
          # function is reached the same way (`train_step.func.jitted_fn`).
          return functools.partial(nnx.cached_partial(f, *args))
        return functools.partial(f, *args)

      self._jitted_train_step_fn = bind(
          train_step, *(getattr(self, name) for name in state)
      )
      self._jitted_eval_step_fn = bind(eval_step, self.model)
    return self._jitted_train_step_fn, self._jitted_eval_step_fn

  def _shard_optimizer(self, mesh: jax.sharding.Mesh) -> None:
    """Places the optimizer state by its shardings, copying no leaf that is
    already placed (as Tunix's, so the train step compiles once)."""
    if mesh.empty:
      return
    state = nnx.state(self.optimizer, nnx.optimizer.OptState)
    shardings = nnx.get_named_sharding(state, mesh)
    nnx.update(self.optimizer, jax.device_put(state, shardings))


class DiffusionSftTrainer(
    aux_metrics.AuxMetricsMixin,
    DonatingStepMixin,
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
      logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
      logits_chunk: int | None = None,
      attention: str = splash_attention.DENSE,
      scan_layers: bool = False,
  ):
    """Builds the trainer; the loss keywords are `loss.sft_loss`'.

    `fingerprint` is stored in every checkpoint's metadata (None: nothing).
    A head or model the chunked head or Splash attention cannot run fails
    here.
    """
    if logits_chunk:
      # Fails closed before any step: a LoRA'd head cannot be split off its
      # rows, so "chunked" logits would be its dense `[batch, length,
      # vocab]` ones, the memory `logits_chunk` is set to save.
      lm_head.model_head(model, config.mask_token_id)
    if splash_attention.check_attention(attention) == splash_attention.SPLASH:
      splash_attention.check_model(model)
    super().__init__(
        model,
        optimizer,
        training_config,
        metrics_logger,
        fingerprint=fingerprint,
    )
    self.with_gen_model_input_fn(loss_lib.sft_model_inputs)
    loss_fn = loss_lib.sft_loss_fn(
        config,
        num_noise_buckets=num_noise_buckets,
        logits_fn=logits_fn,
        logits_chunk=logits_chunk,
        attention=attention,
        scan_layers=scan_layers,
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
  the optimizer steps trained. An evaluation before the last step is
  printed with its step.
  """

  def last(name):
    values = metrics.read_metrics(workdir, name)
    return values[-1] if values else (steps, float("nan"))

  eval_step, eval_loss = last("/eval/loss")
  losses = {
      "train_loss": last("/train/loss")[1],
      "eval_loss": eval_loss,
      "steps": steps,
  }
  at = f" at step {eval_step}" if eval_step != steps else ""
  print(
      f"sft: exported the block-diffusion model to {export_dir} "
      f"(block_size={bd.block_size}, mask id {bd.mask_token_id}, "
      f"{bd.alignment}, {bd.layout}); final train loss "
      f"{losses['train_loss']:.4f}, eval loss {eval_loss:.4f}{at}."
  )
  return losses
