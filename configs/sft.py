# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Convert an AR model into a block-diffusion model with masked-diffusion SFT.

Launch on the embedded default (after `ar_pretrain.py`, whose export it
converts):

  tunix run --plugin tunix_bd sft.py

On your own Qwen3 or Qwen2 checkpoint (an HF directory with its tokenizer)
and data:

  tunix run --plugin tunix_bd sft.py \
      --config.model.checkpoint=/path/to/Qwen3-0.6B \
      --config.data.train=train.jsonl --config.data.eval=eval.jsonl \
      --config.data.max_length=1024 --config.bd.block_size=32 \
      --config.workdir=runs/my_bd

Defaults follow the Fast-dLLM v2 recipe at small scale: shifted alignment
(the AR head keeps its meaning), the clean-context `[noisy ; clean]` layout,
per-block noise t ~ U[1e-3, 1], complementary masking, uniform loss weights.
Examples share a row where they fit, each in whole blocks of its own
(`data.packing`, exact; the batch sizes count rows; docs/design.md "Packed
rows (SFT)").

Through Tunix's own diffusion SFT adapter (`configure_diffusion_sft`, on a
Tunix that has it) instead of tunix_bd's loss hook:
`--config.model.sft_loss=tunix` (the same losses; dense logits, no masked
accuracy; docs/design.md, "Tunix's diffusion contract").

Long rows on a TPU: `--config.model.attention=splash` runs attention through
the Pallas Splash kernel, memory linear in length, equal to the dense path
(Qwen3 without LoRA; docs/design.md, "Splash attention").

LoRA instead of a full fine-tune: `--config.lora.rank=16`. The export keeps
the checkpoint's config, generation config and weight dtype;
`--config.export.dtype=bfloat16` (or float32, float16) sets another.
`--config.export.format=sdar` (a same-position Qwen3) or `fast_dllm_v2` (a
shifted Qwen2, mask token `|<MASK>|`) writes that project's checkpoint
format instead, `--config.export.reference_code=DIR` with its modeling
files (docs/formats.md, "Export").

Variants (`sft.py:VARIANT`): `default`; `long`, the `count` task (long
answers; converts `ar_pretrain.py:long`); `long8` and `long16`, a block-size
curriculum on the `count` task (each continues the previous stage's export
with blocks twice as long: `quickstart.py:long`'s 4-token model, then
`long8`'s); `qwen3`, a real Qwen3 (or Qwen2.5) checkpoint and your chat
JSONL: bf16 compute on float32 master weights, decoder remat, the chunked
head, 1024-token rows, 32-token blocks (Fast-dLLM v2's), learning rate 2e-5
(docs/real_models.md, "Memory per device", gives its memory); `tiny`, a few
steps for smoke tests; `realistic`, the 0.1 B `trace` teacher of
`ar_pretrain.py:realistic` in bfloat16 with 8-token blocks (one TPU v5e
chip), and `realistic_tiny`, its CPU-size twin. After `quickstart.py:long`:

  tunix run --plugin tunix_bd sft.py:long8
  tunix run --plugin tunix_bd sft.py:long16
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.models import lora
from tunix_bd.models import sections
from tunix_bd.sft import corruption
from tunix_bd.training import options

_VARIANTS = (
    "default",
    "long",
    "long8",
    "long16",
    "qwen3",
    "tiny",
    "realistic",
    "realistic_tiny",
)
# Each curriculum stage: (its block size, the export it continues).
_CURRICULUM = {
    "long8": (8, "runs/quickstart_long/sft/export"),
    "long16": (16, "runs/sft_long8/export"),
}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown sft variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "sft"
  config.workdir = "runs/sft"
  config.seed = 0

  # Each section takes its defaults from its settings dataclass, whose
  # docstring says what each key does; this config states what it changes.
  # model.checkpoint: an HF-style directory (config.json, *.safetensors and
  # the tokenizer); dtype, remat and logits_chunk (`models.precision`).
  config.model = config_utils.to_section(sections.SftModel)
  config.bd = config_utils.to_section(sections.Bd)
  config.corruption = config_utils.to_section(
      corruption.SftCorruptionConfig, complementary=True
  )
  # data.packing (on): several examples to a row; batch sizes count rows.
  config.data = config_utils.to_section(
      data_settings.SftData, num_eval=256, max_length=56
  )
  # time_budget_s > 0 also stops at the first step after that many seconds.
  config.train = config_utils.to_section(
      options.TimedTrain,
      batch_size=16,
      gradient_accumulation_steps=1,
      max_steps=1000,
      learning_rate=1e-3,
      warmup_steps=50,
  )
  # rank 0: full fine-tune; rank > 0: LoRA adapters.
  config.lora = config_utils.to_section(lora.LoraSettings)
  config.eval = config_utils.to_section(options.Eval)
  config.export = config_utils.to_section(sections.ExportSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)

  if variant in ("long", *_CURRICULUM):
    config.workdir = f"runs/sft_{variant}"
    config.model.checkpoint = "runs/ar_pretrain_long/export"
    config.data.update(tasks=("count",), max_length=288, num_eval=64)
    # Blocks shorter than a `count` term (5 characters) keep the digits a
    # masked one depends on (the previous number's) in clean context: with
    # 4-token blocks and learning rate 2e-3 this reaches 99.96 % masked
    # accuracy and 98.4 % greedy exact match; 8-token blocks at 1e-3 reached
    # 96.7 % and 9 % in the same 800 steps.
    config.bd.block_size = 4
    config.train.update(
        learning_rate=2e-3,
        max_steps=800,
        eval_every_n_steps=400,
        checkpoint_every_n_steps=400,
    )
    config.eval.update(batch_size=16)
  if variant in _CURRICULUM:
    # From scratch, 8-token blocks stall (above); continuing a converged
    # model with blocks twice as long reached 100 % masked accuracy and
    # greedy exact match in the same 800 steps.
    config.bd.block_size, config.model.checkpoint = _CURRICULUM[variant]
  if variant == "qwen3":
    # A real model: set model.checkpoint, data.train and data.eval.
    config.workdir = "runs/sft_qwen3"
    config.model.update(checkpoint="", dtype="bfloat16", remat="decoder")
    config.bd.block_size = 32
    config.data.update(max_length=1024, enable_thinking=False)
    config.train.update(
        batch_size=16,
        gradient_accumulation_steps=4,
        max_steps=2000,
        learning_rate=2e-5,
        warmup_steps=100,
        eval_every_n_steps=250,
        checkpoint_every_n_steps=250,
    )
    config.eval.update(batch_size=8)
  if variant.startswith("realistic"):
    config.workdir = f"runs/sft_{variant}"
    config.model.update(
        checkpoint=f"runs/ar_pretrain_{variant}/export", dtype="bfloat16"
    )
    config.bd.block_size = 8
    config.data.update(
        tasks=("trace",), num_train=25_600, num_eval=64, max_length=304
    )
    # One epoch of 25,600 traces. After the 1,000-step teacher, 300 steps
    # decoded 90.6 % of final answers at threshold 0.99, 800 steps 97.7 %
    # at 0.97 (docs/results.md, "Realistic trained model").
    config.train.update(
        batch_size=32,
        max_steps=800,
        learning_rate=3e-4,
        warmup_steps=30,
        eval_every_n_steps=400,
        checkpoint_every_n_steps=400,
    )
  if variant == "realistic_tiny":
    config.model.dtype = "float32"
    config.data.update(num_train=64, num_eval=8)
    config.train.update(
        batch_size=4,
        max_steps=2,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(batch_size=8)
  if variant == "tiny":
    config.data.update(num_train=128, num_eval=16, max_len=3)
    config.train.update(
        batch_size=4,
        max_steps=4,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(batch_size=8)
  return config
