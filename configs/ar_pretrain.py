# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Train the embedded AR teacher: a tiny Qwen3 on the digit tasks.

Launch (a few minutes on a 2-core CPU, >= 95% greedy exact match):

  tunix run --plugin tunix_bd ar_pretrain.py

Variants (`ar_pretrain.py:VARIANT`): `default`; `long`, the `count` task
(answers of 199 to 254 characters) for long-generation benchmarks; `tiny`, a
few steps of a smaller model for smoke tests; `realistic`, a 0.1 B Qwen3
on the `trace` task (answers of about 120 to 190 characters) in bfloat16, a few
minutes on one TPU v5e chip (`quickstart.py:realistic`), and
`realistic_tiny`, its CPU-size twin. On your own chat data (the
embedded character tokenizer is used):

  tunix run --plugin tunix_bd ar_pretrain.py \
      --config.data.train=train.jsonl --config.data.eval=eval.jsonl \
      --config.workdir=runs/my_teacher
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.models import from_scratch
from tunix_bd.training import options

_VARIANTS = ("default", "long", "tiny", "realistic", "realistic_tiny")
# `realistic`: 0.10 B parameters (8 layers of 12.6 M; the embedding of the
# 128-token vocabulary is 0.13 M), Qwen3's head_dim and 2:1 grouped queries.
REALISTIC_SHAPE = dict(
    num_layers=8,
    embed_dim=1024,
    hidden_dim=3072,
    num_heads=16,
    head_dim=64,
    num_kv_heads=8,
)
# What `trace` rows need: the longest prompt and answer with the template
# are 105 and 195 tokens (with its stop token).
REALISTIC_MAX_LENGTH = 304


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown ar_pretrain variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "ar_pretrain"
  config.workdir = "runs/ar_pretrain"
  config.seed = 0

  # Each section takes its defaults from its settings dataclass; this
  # config states what it changes.
  config.model = config_utils.to_section(from_scratch.ArModelSettings)
  # data.train / data.eval: JSONL paths; empty means the embedded tasks.
  config.data = config_utils.to_section(data_settings.Data)
  config.train = config_utils.to_section(
      options.Train,
      batch_size=64,
      max_steps=1500,
      learning_rate=2e-3,
      warmup_steps=100,
      eval_every_n_steps=500,
      checkpoint_every_n_steps=500,
  )
  config.eval = config_utils.to_section(options.ArEval, batch_size=128)
  config.mesh = config_utils.to_section(mesh.MeshSettings)

  if variant == "long":
    config.workdir = "runs/ar_pretrain_long"
    config.data.update(tasks=("count",), max_length=288, num_eval=64)
    # Each row supervises ~250 tokens: fewer, smaller steps suffice.
    config.train.update(
        batch_size=16,
        max_steps=800,
        eval_every_n_steps=400,
        checkpoint_every_n_steps=400,
    )
    config.eval.update(max_new_tokens=256, batch_size=64)
  if variant.startswith("realistic"):
    config.workdir = f"runs/ar_pretrain_{variant}"
    config.model.update(REALISTIC_SHAPE, dtype="bfloat16")
    config.data.update(
        tasks=("trace",),
        num_train=64_000,
        num_eval=64,
        max_length=REALISTIC_MAX_LENGTH,
    )
    # One epoch of 64,000 traces: 25 % exact match at 500 steps, 100 % at
    # 1,000 (docs/results.md, "Realistic trained model").
    config.train.update(
        batch_size=64,
        max_steps=1000,
        learning_rate=1e-3,
        warmup_steps=100,
        eval_every_n_steps=500,
        checkpoint_every_n_steps=500,
    )
    config.eval.update(max_new_tokens=200, batch_size=64)
  if variant == "realistic_tiny":
    config.model.update(from_scratch.TINY_SHAPE, dtype="float32")
    config.data.update(num_train=64, num_eval=8)
    config.train.update(
        batch_size=8,
        max_steps=2,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(batch_size=8)
  if variant == "tiny":
    config.model.update(from_scratch.TINY_SHAPE)
    config.data.update(num_train=256, num_eval=32, max_len=3)
    config.train.update(
        batch_size=8,
        max_steps=4,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(max_new_tokens=6, batch_size=16)
  return config
