# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A recipe's `train` section as Tunix's optimizer and `TrainingConfig`.

`Train` is the `train` config section field for field and the one source of
its defaults (`config_utils.to_section` / `from_section`), checked as a
whole before any compute; SFT's and OPD's add a time budget (`TimedTrain`),
GRPO's Tunix's RL batch sizes (`RlTrain`). The `eval` section of each
training recipe is `Eval` or a subclass of it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, ClassVar, Iterable, Iterator, TypeVar

import jax
import optax
import orbax.checkpoint as ocp

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd.training import metrics

T = TypeVar("T")
OPTIMIZERS = ("adamw", "adafactor")


def _check_ints(section: Any, zero_ok: tuple[str, ...]) -> None:
  """Checks every `int` field of `section` >= 1 (>= 0: those in `zero_ok`)."""
  for field in dataclasses.fields(section):
    if field.type == "int":
      key = f"{section.SECTION}.{field.name}"
      minimum = 0 if field.name in zero_ok else 1
      config_utils.check_int(key, getattr(section, field.name), minimum)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Train:
  """How to train: batch, schedule, AdamW, evaluation and checkpoints.

  Attributes:
    batch_size: examples per optimizer update (the global batch).
    max_steps: optimizer updates in the whole run.
    learning_rate: the peak rate, reached after `warmup_steps`, then cosine
      decay to 10 % of it at `max_steps`.
    warmup_steps: linear warmup updates, < `max_steps`.
    weight_decay: AdamW's decoupled weight decay.
    max_grad_norm: gradients are clipped to this global norm.
    eval_every_n_steps: updates between evaluations.
    checkpoint_every_n_steps: updates between orbax checkpoints.
    checkpoints_to_keep: the newest checkpoints kept.
    gradient_accumulation_steps: micro-batches per update; divides
      `batch_size`. None and 1: no accumulation (`training_config`).
    optimizer: `adamw`, or `adafactor`: factored second moments and no
      first moment, a row and a column per matrix instead of two float32
      copies of the weights (full fine-tuning of Qwen3-0.6B on one 16 GiB
      chip); the same schedule, clipping and decoupled weight decay.
  """

  SECTION: ClassVar[str] = "train"

  batch_size: int = 16
  # Extending a run (more steps) keeps its checkpoints' meaning, as do the
  # evaluation and checkpoint cadences; everything else is fingerprinted.
  max_steps: int = config_utils.resumable(default=1000)
  learning_rate: float = 1e-3
  warmup_steps: int = 10
  weight_decay: float = 0.01
  max_grad_norm: float = 1.0
  eval_every_n_steps: int = config_utils.resumable(default=200)
  checkpoint_every_n_steps: int = config_utils.resumable(default=200)
  checkpoints_to_keep: int = config_utils.resumable(default=2)
  gradient_accumulation_steps: int | None = None
  optimizer: str = "adamw"

  def __post_init__(self):
    config_utils.check_choice("train.optimizer", self.optimizer, OPTIMIZERS)
    _check_ints(self, ("warmup_steps",))
    for name in ("learning_rate", "weight_decay", "max_grad_norm"):
      config_utils.check_number(
          f"train.{name}", getattr(self, name), 0, strict=name != "weight_decay"
      )
    if self.warmup_steps >= self.max_steps:
      raise ValueError(
          f"train.warmup_steps={self.warmup_steps} must be smaller than "
          f"train.max_steps={self.max_steps}."
      )
    k = self.gradient_accumulation_steps
    key = "train.gradient_accumulation_steps"
    if k is not None and self.batch_size % config_utils.check_int(key, k, 1):
      raise ValueError(
          f"{key}={k} must divide train.batch_size={self.batch_size}."
      )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimedTrain(Train):
  """SFT's and OPD's `train`: `Train` and `time_budget_s`, > 0 also stops
  training at the first update boundary after this many seconds
  (equal-time comparisons); 0: no limit."""

  time_budget_s: float = config_utils.resumable(default=0.0)

  def __post_init__(self):
    super().__post_init__()
    config_utils.check_number("train.time_budget_s", self.time_budget_s, 0)

  @property
  def seconds(self) -> float | None:
    """`time_budget_s`; None when there is none."""
    return float(self.time_budget_s) or None

  def bounded(self, batches: Iterable[T]) -> Iterable[T]:
    """`batches`, ending once the time budget is spent (as they are without);
    the clock starts at the first batch, so compilation counts."""
    return _until(self.seconds, batches) if self.seconds else batches


@dataclasses.dataclass(frozen=True, kw_only=True)
class RlTrain(Train):
  """GRPO's `train`: `Train` and Tunix's `RLTrainingConfig` batch sizes.

  `gradient_accumulation_steps` is refused: Tunix accumulates
  `mini_batch_size // train_micro_batch_size` micro-batches.

  Attributes:
    mini_batch_size: prompts per optimizer update; divides `batch_size`.
      None: the whole batch.
    train_micro_batch_size: prompts per forward/backward; divides
      `mini_batch_size`. None: the mini-batch.
  """

  mini_batch_size: int | None = None
  train_micro_batch_size: int | None = None

  def __post_init__(self):
    super().__post_init__()
    for name in ("mini_batch_size", "train_micro_batch_size"):
      if (value := getattr(self, name)) is not None:
        config_utils.check_int(f"train.{name}", value, 1)
    if self.gradient_accumulation_steps is not None:
      raise ValueError(
          "train.gradient_accumulation_steps is not an RL setting: Tunix"
          " accumulates train.mini_batch_size // train.train_micro_batch_size"
          " micro-batches; set those instead."
      )
    mini = self.mini_batch_size or self.batch_size
    micro = self.train_micro_batch_size or mini
    if self.batch_size % mini:
      raise ValueError(
          f"train.mini_batch_size={mini} must divide"
          f" train.batch_size={self.batch_size}."
      )
    if mini % micro:
      raise ValueError(
          f"train.train_micro_batch_size={micro} must divide"
          f" train.mini_batch_size={mini}."
      )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Eval:
  """SFT's `eval`, the base of every training recipe's: `batch_size`, rows
  per evaluation call (SFT: of its held-out loss). How the run is measured,
  never what it trains: a resume may change any key. Its subclasses' int
  keys are checked here too."""

  SECTION: ClassVar[str] = "eval"

  batch_size: int = config_utils.resumable(default=64)

  def __post_init__(self):
    _check_ints(self, ("sampled_samples", "seed"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArEval(Eval):
  """AR pretraining's `eval`: greedy decoding with Tunix's `Sampler` of
  `max_new_tokens` tokens."""

  max_new_tokens: int = config_utils.resumable(default=16)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeEval(Eval):
  """OPD's `eval`, its decode evaluation before, during and after training:
  `thresholds`, those of the greedy evaluation, in (0, 1] (under a
  `rollout.rule` other than `threshold` it decodes once, at the rule's own
  parameter)."""

  thresholds: tuple[float, ...] = config_utils.resumable(default=(0.5, 0.9))

  def __post_init__(self):
    super().__post_init__()
    thresholds = self.thresholds
    if (
        isinstance(thresholds, (str, bytes))
        or not thresholds
        or not all(map(config_utils.is_threshold, thresholds))
    ):
      raise ValueError(
          f"{self.SECTION}.thresholds must be numbers in (0, 1], got"
          f" {thresholds!r}."
      )
    object.__setattr__(self, "thresholds", tuple(map(float, thresholds)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldOutEval(DecodeEval):
  """GRPO's `eval`: its held-out evaluation before and after
  (`rl.evaluation`), greedy and sampled.

  Attributes:
    num_prompts: held-out prompts (the data's eval split).
    sampled_samples: samples per prompt of the sampled evaluation; 0: none.
    sampled_threshold: its commit threshold, in (0, 1] (as `thresholds`).
    sampled_temperature: its temperature, > 0.
    seed: sample `s` of prompt `i` uses seed `seed + s * num_prompts + i`,
      the same before and after training, so the two are paired.
  """

  num_prompts: int = config_utils.resumable(default=256)
  sampled_samples: int = config_utils.resumable(default=4)
  sampled_threshold: float = config_utils.resumable(default=0.5)
  sampled_temperature: float = config_utils.resumable(default=1.0)
  seed: int = config_utils.resumable(default=0)

  def __post_init__(self):
    super().__post_init__()
    key = lambda name: f"{self.SECTION}.{name}"
    if not config_utils.is_threshold(self.sampled_threshold):
      raise ValueError(
          f"{key('sampled_threshold')} must be a number in (0, 1], got"
          f" {self.sampled_threshold!r}."
      )
    config_utils.check_number(
        key("sampled_temperature"), self.sampled_temperature, 0, strict=True
    )


def _until(seconds: float, batches: Iterable[T]) -> Iterator[T]:
  start = None
  for batch in batches:
    start = time.perf_counter() if start is None else start
    if time.perf_counter() - start > seconds:
      return
    yield batch


def optimizer(settings: Train) -> optax.GradientTransformation:
  """`train.optimizer` with linear warmup and cosine decay to 10% of the
  peak rate, after clipping to the global norm."""
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0,
      peak_value=settings.learning_rate,
      warmup_steps=settings.warmup_steps,
      decay_steps=settings.max_steps,
      end_value=0.1 * settings.learning_rate,
  )
  # Hyperparameters injected at the top level, where Tunix looks for the
  # learning rate it logs.
  return optax.inject_hyperparams(
      _clipped, static_args=("name", "max_grad_norm")
  )(
      name=settings.optimizer,
      learning_rate=schedule,
      weight_decay=settings.weight_decay,
      max_grad_norm=settings.max_grad_norm,
  )


def _clipped(
    name: str,
    learning_rate: optax.ScalarOrSchedule,
    weight_decay: float,
    max_grad_norm: float,
) -> optax.GradientTransformation:
  if name == "adamw":
    update = optax.adamw(learning_rate, weight_decay=weight_decay)
  else:
    # Adafactor's direction (optax's defaults: factored second moments,
    # updates clipped to RMS 1), then AdamW's decoupled weight decay and
    # learning rate, so both keys mean what they mean for AdamW (optax's
    # `adafactor` would not scale the decay by the rate).
    update = optax.chain(
        optax.scale_by_factored_rms(),
        optax.clip_by_block_rms(1.0),
        optax.add_decayed_weights(weight_decay),
        optax.scale_by_learning_rate(learning_rate),
    )
  return optax.chain(optax.clip_by_global_norm(max_grad_norm), update)


def training_config(
    settings: Train, workdir: str, description: str
) -> compat.TrainingConfig:
  """Tunix's TrainingConfig: checkpoints to `workdir/checkpoints`, metrics
  to `workdir/tensorboard` and `workdir/metrics.jsonl`, the progress bar."""
  # Orbax only accepts absolute checkpoint paths; users give relative ones.
  workdir = files.absolute(workdir)
  log_dir = os.path.join(workdir, "tensorboard")
  steps = settings.gradient_accumulation_steps
  return compat.TrainingConfig(
      # None unless over 1: Tunix wraps the optimizer in `optax.MultiSteps`
      # for any other value, which at k=1 only adds a parameter-sized
      # accumulator.
      gradient_accumulation_steps=steps if steps and steps > 1 else None,
      eval_every_n_steps=settings.eval_every_n_steps,
      max_steps=settings.max_steps,
      checkpoint_root_directory=os.path.join(workdir, "checkpoints"),
      checkpointing_options=ocp.CheckpointManagerOptions(
          save_interval_steps=settings.checkpoint_every_n_steps,
          max_to_keep=settings.checkpoints_to_keep,
          # Not on CPU, where orbax's device-to-host transfer is a zero-copy
          # view of each array, which a background write keeps alive into the
          # next steps: they could not donate the weights and optimizer state.
          enable_async_checkpointing=jax.default_backend() != "cpu",
      ),
      metrics_logging_options=compat.MetricsLoggerOptions(
          log_dir=log_dir,
          flush_every_n_steps=10,
          backend_kwargs={
              "custom_backend": [
                  lambda: compat.TensorboardBackend(
                      log_dir=log_dir, flush_every_n_steps=10
                  ),
                  lambda: metrics.JsonlMetricsBackend(
                      os.path.join(workdir, metrics.METRICS_FILE)
                  ),
              ]
          },
      ),
      data_sharding_axis=("fsdp",),
      pbar_description=description,
  )
