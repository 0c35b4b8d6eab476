# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Pieces every training recipe shares: mesh, model init, Tunix options.

Recipes turn a `ConfigDict` into Tunix objects here, in one place, so that
each stage (AR pretraining, diffusion SFT, ...) configures meshes, metrics,
checkpoints and optimizers the same way.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from absl import logging
from flax import nnx
import jax
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
from tunix.models.qwen3 import model as qwen3_lib
from tunix.sft import metrics_logger

from tunix_bd import compat
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config

MESH_AXES = ("fsdp", "tp")


def make_mesh(mesh_config: ml_collections.ConfigDict) -> jax.sharding.Mesh:
  """Builds the `(fsdp, tp)` device mesh; `fsdp=-1` takes every device left.

  Raises:
    ValueError: if the axis sizes do not multiply to the device count.
  """
  num_devices = jax.device_count()
  fsdp, tp = int(mesh_config.fsdp), int(mesh_config.tp)
  if tp < 1 or (fsdp < 1 and fsdp != -1):
    raise ValueError(
        f"mesh.fsdp must be >= 1 or -1 and mesh.tp >= 1, got fsdp={fsdp}, "
        f"tp={tp}."
    )
  if fsdp == -1:
    fsdp = num_devices // tp
  if fsdp * tp != num_devices:
    raise ValueError(
        f"mesh.fsdp * mesh.tp = {fsdp} * {tp} must equal the {num_devices} "
        "available devices."
    )
  devices = np.asarray(jax.devices()).reshape(fsdp, tp)
  return jax.sharding.Mesh(devices, MESH_AXES)


def require_positive(config: ml_collections.ConfigDict, *keys: str) -> None:
  """Fails closed unless each dotted `section.name` key is an int >= 1."""
  for key in keys:
    value = config
    for part in key.split("."):
      value = value[part]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ValueError(f"{key} must be a positive integer, got {value!r}.")


def qwen3_config(
    model_config: ml_collections.ConfigDict, vocab_size: int
) -> qwen3_lib.ModelConfig:
  """The Tunix Qwen3 config of a from-scratch model section."""
  return qwen3_lib.ModelConfig(
      num_layers=model_config.num_layers,
      vocab_size=vocab_size,
      embed_dim=model_config.embed_dim,
      hidden_dim=model_config.hidden_dim,
      num_heads=model_config.num_heads,
      head_dim=model_config.head_dim,
      num_kv_heads=model_config.num_kv_heads,
      # Tunix's Qwen3 applies RoPE with a fixed theta of 1e6 whatever this
      # says, so the config states the value that is really used.
      rope_theta=hf_config.TUNIX_ROPE_THETA,
      norm_eps=model_config.norm_eps,
      use_tied_embedding=model_config.tie_embeddings,
  )


def init_model(
    config: qwen3_lib.ModelConfig, seed: int, mesh: jax.sharding.Mesh
) -> qwen3_lib.Qwen3:
  """A randomly initialised Qwen3, sharded over `mesh`."""

  @nnx.jit
  def create():
    model = qwen3_lib.Qwen3(config, rngs=nnx.Rngs(seed))
    state = nnx.state(model)
    shardings = nnx.get_named_sharding(state, mesh)
    nnx.update(model, jax.lax.with_sharding_constraint(state, shardings))
    return model

  with mesh:
    return create()


def optimizer(
    train_config: ml_collections.ConfigDict,
) -> optax.GradientTransformation:
  """AdamW with linear warmup and cosine decay to 10% of the peak rate."""
  if train_config.warmup_steps >= train_config.max_steps:
    raise ValueError(
        f"train.warmup_steps={train_config.warmup_steps} must be smaller than "
        f"train.max_steps={train_config.max_steps}."
    )
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0,
      peak_value=train_config.learning_rate,
      warmup_steps=train_config.warmup_steps,
      decay_steps=train_config.max_steps,
      end_value=0.1 * train_config.learning_rate,
  )
  # Hyperparameters injected at the top level, where Tunix looks for the
  # learning rate it logs.
  return optax.inject_hyperparams(_clipped_adamw, static_args="max_grad_norm")(
      learning_rate=schedule,
      weight_decay=train_config.weight_decay,
      max_grad_norm=train_config.max_grad_norm,
  )


def _clipped_adamw(
    learning_rate: optax.ScalarOrSchedule,
    weight_decay: float,
    max_grad_norm: float,
) -> optax.GradientTransformation:
  return optax.chain(
      optax.clip_by_global_norm(max_grad_norm),
      optax.adamw(learning_rate, weight_decay=weight_decay),
  )


class JsonlMetricsBackend:
  """A Tunix metrics backend that appends scalars to `metrics.jsonl`.

  TensorBoard files need TensorBoard to read; this file is for people and
  scripts that would rather `grep` or `json.loads` a line.
  """

  def __init__(self, path: str):
    self._path = path
    self._closed = False

  def log_scalar(self, event: str, value: Any, **kwargs):
    # jax.monitoring also reports JAX's own events, and may still call a
    # listener that Tunix failed to clear after closing.
    if self._closed or event.startswith("/jax/"):
      return
    step = kwargs.get("step")
    record = {"name": event, "step": None if step is None else int(step)}
    record["value"] = float(np.asarray(value))
    with open(self._path, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")

  def close(self):
    self._closed = True


def metrics_logging_options(
    workdir: str,
) -> metrics_logger.MetricsLoggerOptions:
  """TensorBoard under `workdir/tensorboard` plus `workdir/metrics.jsonl`."""
  log_dir = os.path.join(workdir, "tensorboard")
  return metrics_logger.MetricsLoggerOptions(
      log_dir=log_dir,
      flush_every_n_steps=10,
      backend_kwargs={
          "custom_backend": [
              lambda: metrics_logger.TensorboardBackend(
                  log_dir=log_dir, flush_every_n_steps=10
              ),
              lambda: JsonlMetricsBackend(
                  os.path.join(workdir, "metrics.jsonl")
              ),
          ]
      },
  )


def training_config(
    train_config: ml_collections.ConfigDict,
    workdir: str,
    description: str,
    gradient_accumulation_steps: int | None = None,
) -> compat.TrainingConfig:
  """Tunix's TrainingConfig: checkpoints, metrics and the progress bar."""
  # Orbax only accepts absolute checkpoint paths; users give relative ones.
  workdir = os.path.abspath(workdir)
  return compat.TrainingConfig(
      gradient_accumulation_steps=gradient_accumulation_steps,
      eval_every_n_steps=train_config.eval_every_n_steps,
      max_steps=train_config.max_steps,
      checkpoint_root_directory=os.path.join(workdir, "checkpoints"),
      checkpointing_options=ocp.CheckpointManagerOptions(
          save_interval_steps=train_config.checkpoint_every_n_steps,
          max_to_keep=train_config.checkpoints_to_keep,
      ),
      metrics_logging_options=metrics_logging_options(workdir),
      data_sharding_axis=("fsdp",),
      pbar_description=description,
  )


def export_qwen3(model, tokenizer, export_dir: str) -> None:
  """Writes the HF-style directory, replacing a previous export."""
  previous = export_dir + ".previous"
  if os.path.exists(export_dir):
    shutil.rmtree(previous, ignore_errors=True)
    os.replace(export_dir, previous)
  hf_checkpoint.save_qwen3(
      model,
      export_dir,
      tokenizer=tokenizer,
      hf_config_extra={
          "eos_token_id": tokenizer.eos_token_id,
          "pad_token_id": tokenizer.pad_token_id,
      },
  )
  shutil.rmtree(previous, ignore_errors=True)


def write_json(path: str, content: Any) -> None:
  """Writes `content` as JSON, atomically (a crash leaves no half file)."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(content, f, indent=1)
  os.replace(path + ".tmp", path)


def read_metrics(workdir: str, name: str) -> list[tuple[int, float]]:
  """`(step, value)` pairs of one metric from `workdir/metrics.jsonl`."""
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    records = [json.loads(line) for line in f if line.strip()]
  return [(r["step"], r["value"]) for r in records if r["name"] == name]


def log_summary(title: str, rows: dict[str, float]) -> str:
  """A small aligned text table, logged and returned."""
  width = max(len(k) for k in rows)
  lines = [title] + [f"  {k:<{width}}  {v:7.2%}" for k, v in rows.items()]
  text = "\n".join(lines)
  logging.info("%s", text)
  return text
