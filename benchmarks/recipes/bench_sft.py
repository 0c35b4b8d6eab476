# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_sft`: SFT step throughput and memory, side by side.

Times plain AR SFT, single-canvas and clean-context block-diffusion SFT
steps (`bench.variants`) on one random Qwen3 of the `model` shape and one
batch of the embedded task, interleaved; prints tokens/s, XLA's peak memory
and `memory_plan.sft_step_plan`'s estimate of each, as ratios to AR
(`benchmarks.sft_step`), with each step's `real_token_share` (the batch is
packed as `data.packing` packs SFT's), `mfu`, `mfu_real_tokens` and
`compile_s`, and writes them to `output` when set.

The model is over the tokenizer's vocabulary or a larger `model.vocab_size`
(a real model's, e.g. Qwen3's 151,936 ids), with the `model.dtype`,
`model.remat` and `model.logits_chunk` of the SFT recipe; the AR step uses
the same model.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import ml_collections

from benchmarks import sft_step
from benchmarks import sft_step_settings
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.models import sections
from tunix_bd.run import stage as stage_lib


@dataclasses.dataclass(frozen=True)
class BenchSftConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: sft_step_settings.SftStepModelSettings
  bd: sections.BlockSize
  data: data_settings.SftData
  bench: sft_step_settings.SftStepSettings
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[BenchSftConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  return stage_lib.Stage(config, BenchSftConfig, writes="output")


def prepare(
    settings: BenchSftConfig,
) -> tuple[dict[str, Any], sft_step.Batch, int]:
  """`(arms, batch, tokenizer size)`: each variant's `(loss_fn, inputs)`
  on the first batch of the embedded task, and that batch."""
  data_section = settings.data
  tokenizer = tokenizer_lib.override_chat_template(
      tokenizer_lib.build_char_tokenizer(), data_section.chat_template
  )
  conversations = dataset_lib.train_conversations(data_section, "bench_sft")
  data = dataset_lib.tokenize(
      tokenizer,
      conversations,
      data_section.max_length,
      data_section.chat_options,
  )
  mask_id = tokenizer.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
  batch = sft_step.first_batch(
      data,
      batch_size=settings.bench.batch_size,
      bd=sft_step.block_diffusion(
          settings.bd.block_size, mask_id, bd_config_lib.CLEAN_CONTEXT
      ),
      eos_id=tokenizer.eos_token_id,
      packing=data_section.packing,
  )
  arms = sft_step.variants(
      settings.bench.variants,
      batch,
      block_size=settings.bd.block_size,
      mask_id=mask_id,
      chunk=settings.model.chunk,
      attention=settings.model.attention,
  )
  return arms, batch, len(tokenizer)


def run(config: ml_collections.ConfigDict) -> dict[str, dict[str, float]]:
  """Prints and returns tokens/s, ratios and peak bytes of each variant."""
  settings = validate(config).settings
  bench, model = settings.bench, settings.model
  arms, batch, tokenizer_size = prepare(settings)
  mesh = mesh_lib.make_mesh(settings.mesh)
  model_config = model.qwen3_config(tokenizer_size)
  times, peaks, compile_s = sft_step.measure(
      arms,
      model_config,
      seed=config.seed,
      mesh=mesh,
      warmup_steps=bench.warmup_steps,
      num_steps=bench.num_steps,
      optimizer=bench.optimizer,
  )

  planned = {
      name: sft_step.planned_bytes(
          model,
          model_config.vocab_size,
          batch_size=bench.batch_size,
          length=batch.length,
          variant=name,
          optimizer=bench.optimizer,
      )
      for name in arms
  }
  shape = sft_step.model_shape(model, model_config.vocab_size)
  flops = {
      name: sft_step.model_flops(
          shape, batch_size=bench.batch_size, length=batch.length, variant=name
      )
      for name in arms
  }
  report = sft_step.summarize(
      times,
      peaks,
      planned,
      batch.real_tokens,
      flops,
      real_token_share=batch.real_token_share,
      compile_s=compile_s,
  )
  packed = ", packed" if settings.data.packing else ""
  caption = [
      (
          f"SFT step benchmark: batch {bench.batch_size} x {batch.length}"
          f" tokens ({batch.real_tokens} real,"
          f" {batch.real_token_share:.0%}{packed}), block size"
          f" {settings.bd.block_size}, {bench.num_steps} interleaved steps,"
          f" {jax.device_count()} {jax.devices()[0].platform} device(s)"
      ),
      (
          f"  model: {model_config.num_layers} layers, width"
          f" {model_config.embed_dim}, vocabulary {model_config.vocab_size},"
          f" dtype {model.dtype}, remat {model.remat}, logits_chunk"
          f" {model.logits_chunk}"
      ),
  ]
  print(sft_step.format_table(report, caption))
  if config.output:
    report_lib.write_json(config.output, report)
  return report
