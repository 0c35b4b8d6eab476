# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_sft`: SFT step throughput and memory, side by side.

One run times up to three training steps (`variants`) on the same model and
the same batch of the embedded task: plain AR SFT (Tunix's next-token loss,
causal mask), block-diffusion SFT on a single canvas, and block-diffusion
SFT in the clean-context `[noisy ; clean]` layout (which runs the model over
twice the length). Steps are interleaved round-robin so that a noisy, shared
machine slows all alike; the report is ratios to AR. Peak memory is XLA's
compiled estimate (arguments + outputs + temporaries) of each step, which is
the same on every run of a given shape; `memory_plan.sft_step_plan`'s paper
estimate is printed beside it.

The model is a random Qwen3 of the `model` shape, over the tokenizer's
vocabulary or a larger `model.vocab_size` (a real model's, e.g. Qwen3's
151,936 ids), with the `model.dtype`, `model.remat` and `model.logits_chunk`
of the SFT recipe (`models.precision`); the AR step uses the same model.

Tokens/s counts the real (non-pad) tokens of the batch, the same for all
variants, so the ratios compare the cost of learning from the same data.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.models import from_scratch
from tunix_bd.models import precision as precision_lib
from tunix_bd.rl import memory_plan
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.sft import batching
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import loss as loss_lib
from tunix_bd.training import ar


def _train_step(loss_fn: Callable[..., Any]):
  """A jitted full fine-tuning step of `loss_fn(model, **batch)`."""

  @nnx.jit
  def step(model, optimizer, batch):
    def loss_of(model):
      out = loss_fn(model, **batch)
      return out[0] if isinstance(out, tuple) else out

    loss, grads = nnx.value_and_grad(loss_of)(model)
    optimizer.update(model, grads)
    return loss

  return step


def _peak_bytes(step, model, optimizer, batch) -> int:
  analysis = step.lower(model, optimizer, batch).compile().memory_analysis()
  if analysis is None:
    return -1
  return int(
      analysis.argument_size_in_bytes
      + analysis.output_size_in_bytes
      + analysis.temp_size_in_bytes
      - analysis.alias_size_in_bytes
  )


VARIANTS = ("ar", "bd_single_canvas", "bd_clean_context")
# `model` keys beside the shape: the vocabulary and the precision keys.
_MODEL_EXTRAS = ("vocab_size", "dtype", "remat", "logits_chunk")


def _model_settings(model: ml_collections.ConfigDict):
  """`(shape, vocab_size or 0, precision)` of the `model` section."""
  values = config_utils.section_dict(model, "model")
  shape = config_utils.from_section(
      from_scratch.ScratchModelSettings,
      {k: v for k, v in values.items() if k not in _MODEL_EXTRAS},
      "model",
  )
  vocab_size = config_utils.check_int(
      "model.vocab_size", values.get("vocab_size", 0), 0
  )
  return shape, vocab_size, precision_lib.from_section(values)


def _plan(shape, vocab_size, precision, batch_size, length, variant):
  """`memory_plan.sft_step_plan` of one variant (bytes, all parts)."""
  return memory_plan.sft_step_plan(
      memory_plan.ModelShape(
          shape.num_layers,
          shape.embed_dim,
          shape.hidden_dim,
          shape.num_heads,
          shape.num_kv_heads,
          shape.head_dim,
          vocab_size,
          shape.tie_embeddings,
      ),
      memory_plan.SftStep(
          batch_size=batch_size,
          length=length,
          clean_context=variant == "bd_clean_context",
          autoregressive=variant == "ar",
          dtype_bytes=2 if precision.dtype == "bfloat16" else 4,
          remat=precision.remat,
          logits_chunk=0 if variant == "ar" else precision.logits_chunk,
      ),
  )


def run(config: ml_collections.ConfigDict) -> dict[str, dict[str, float]]:
  """Prints and returns tokens/s, ratios and peak bytes of each variant."""
  if config.output:
    workdir_lib.check_file(config.output, "output")
  for key in ("batch_size", "num_steps", "warmup_steps"):
    config_utils.check_int(key, config[key], 1)
  config_utils.check_int("bd.block_size", config.bd.block_size, 1)
  chosen = tuple(config.variants)
  if "ar" not in chosen or not set(chosen) <= set(VARIANTS):
    raise ValueError(
        f"variants must include 'ar' and be among {list(VARIANTS)}, got"
        f" {list(chosen)}."
    )
  model_settings, vocab_size, precision = _model_settings(config.model)
  tokenizer = tokenizer_lib.override_chat_template(
      tokenizer_lib.build_char_tokenizer(), config.data.chat_template
  )
  train = dataset_lib.train_conversations(config.data, "bench_sft")
  data = dataset_lib.tokenize(
      tokenizer,
      train,
      config.data.max_length,
      chat.options_from_data(config.data),
  )
  mask_id = tokenizer.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
  corruption = corruption_lib.SftCorruptionConfig(
      min_noise=1e-3, max_noise=1.0, complementary=False
  )
  mesh = mesh_lib.from_section(config.mesh)
  if vocab_size and vocab_size < len(tokenizer):
    raise ValueError(
        f"model.vocab_size={vocab_size} is smaller than the tokenizer's"
        f" {len(tokenizer)} ids."
    )
  vocab_size = vocab_size or len(tokenizer)
  model_config = precision.model_config(
      from_scratch.qwen3_config(model_settings, vocab_size)
  )

  def bd(layout):
    return bd_config_lib.BlockDiffusionConfig(
        block_size=config.bd.block_size,
        mask_token_id=mask_id,
        alignment=bd_config_lib.SHIFTED,
        layout=layout,
    )

  sft_batch = next(
      iter(
          batching.sft_batches(
              data,
              batch_size=config.batch_size,
              corruption=corruption,
              config=bd(bd_config_lib.CLEAN_CONTEXT),
              eos_id=tokenizer.eos_token_id,
              seed=0,
          )
      )
  )
  ar_batch = ar.ar_model_inputs({
      "tokens": jnp.asarray(sft_batch.tokens),
      "completion_mask": jnp.asarray(sft_batch.completion_mask),
      "valid_mask": jnp.asarray(sft_batch.segment_ids > 0),
  })
  sft_inputs = loss_lib.sft_model_inputs(jax.tree.map(jnp.asarray, sft_batch))
  bd_loss = lambda layout: functools.partial(
      loss_lib.sft_loss, config=bd(layout), logits_chunk=precision.chunk
  )
  variants = {
      # Tunix's own AR SFT loss, the one `PeftTrainer` uses by default.
      "ar": (compat.default_sft_loss, ar_batch),
      "bd_single_canvas": (bd_loss(bd_config_lib.SINGLE_CANVAS), sft_inputs),
      "bd_clean_context": (bd_loss(bd_config_lib.CLEAN_CONTEXT), sft_inputs),
  }
  variants = {name: variants[name] for name in chosen}
  real_tokens = int(np.sum(sft_batch.segment_ids > 0))
  states, times, peaks = {}, {name: [] for name in variants}, {}
  with mesh_lib.tunix_context(mesh):
    # One model and optimizer state for all variants, whose steps alternate
    # on it (the values do not change the cost): the memory of one.
    model = from_scratch.init_model(model_config, config.seed, mesh)
    optimizer = nnx.Optimizer(model, optax.adamw(1e-4), wrt=nnx.Param)
    for name, (loss_fn, batch) in variants.items():
      step = _train_step(loss_fn)
      peaks[name] = _peak_bytes(step, model, optimizer, batch)
      for _ in range(config.warmup_steps):
        jax.block_until_ready(step(model, optimizer, batch))
      states[name] = (step, model, optimizer, batch)
    for _ in range(config.num_steps):
      for name, (step, model, optimizer, batch) in states.items():
        start = time.perf_counter()
        jax.block_until_ready(step(model, optimizer, batch))
        times[name].append(time.perf_counter() - start)

  report = {}
  ar_rate = real_tokens / float(np.median(times["ar"]))
  for name in variants:
    rate = real_tokens / float(np.median(times[name]))
    report[name] = {
        "tokens_per_s": rate,
        "throughput_vs_ar": rate / ar_rate,
        "step_ms": 1e3 * float(np.median(times[name])),
        "peak_bytes": peaks[name],
        "peak_vs_ar": peaks[name] / max(peaks["ar"], 1),
        "planned_bytes": (
            _plan(
                model_settings,
                vocab_size,
                precision,
                config.batch_size,
                data.max_length,
                name,
            ).total
        ),
    }
  lines = [
      (
          f"SFT step benchmark: batch {config.batch_size} x "
          f"{data.max_length} tokens ({real_tokens} real), block size "
          f"{config.bd.block_size}, {config.num_steps} interleaved steps, "
          f"{jax.device_count()} {jax.devices()[0].platform} device(s)"
      ),
      (
          f"  model: {model_config.num_layers} layers, width"
          f" {model_config.embed_dim}, vocabulary {vocab_size}, dtype"
          f" {precision.dtype}, remat {precision.remat}, logits_chunk"
          f" {precision.logits_chunk}"
      ),
      (
          f"  {'variant':<18}{'tokens/s':>11}{'vs AR':>8}{'step ms':>10}"
          f"{'peak MiB':>10}{'vs AR':>8}{'plan MiB':>10}"
      ),
  ]
  for name, r in report.items():
    lines.append(
        f"  {name:<18}{r['tokens_per_s']:>11.0f}{r['throughput_vs_ar']:>8.2f}"
        f"{r['step_ms']:>10.1f}{r['peak_bytes'] / 2**20:>10.2f}"
        f"{r['peak_vs_ar']:>8.2f}{r['planned_bytes'] / 2**20:>10.2f}"
    )
  print("\n".join(lines))
  if config.output:
    report_lib.write_json(config.output, report)
  return report
