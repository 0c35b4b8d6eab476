# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_sft`: SFT step throughput and memory, side by side.

One run times three training steps on the same model and the same batch of
the embedded task: plain AR SFT (Tunix's next-token loss, causal mask),
block-diffusion SFT on a single canvas, and block-diffusion SFT in the
clean-context `[noisy ; clean]` layout (which runs the model over twice the
length). Steps are interleaved round-robin so that a noisy, shared machine
slows all three alike; the report is ratios to AR. Peak memory is XLA's
compiled estimate (arguments + outputs + temporaries) of each step, which is
the same on every run of a given shape.

Tokens/s counts the real (non-pad) tokens of the batch, the same for all
three, so the ratios compare the cost of learning from the same data.
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


def run(config: ml_collections.ConfigDict) -> dict[str, dict[str, float]]:
  """Prints and returns tokens/s, ratios and peak bytes of each variant."""
  if config.output:
    workdir_lib.check_file(config.output, "output")
  for key in ("batch_size", "num_steps", "warmup_steps"):
    config_utils.check_int(key, config[key], 1)
  config_utils.check_int("bd.block_size", config.bd.block_size, 1)
  model_settings = config_utils.from_section(
      from_scratch.ScratchModelSettings, config.model, "model"
  )
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
  model_config = from_scratch.qwen3_config(model_settings, len(tokenizer))

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
      "tokens": jnp.asarray(sft_batch["tokens"]),
      "completion_mask": jnp.asarray(sft_batch["completion_mask"]),
      "valid_mask": jnp.asarray(sft_batch["segment_ids"] > 0),
  })
  sft_inputs = {k: jnp.asarray(v) for k, v in sft_batch.items()}
  sft_inputs = loss_lib.sft_model_inputs(sft_inputs)
  variants = {
      # Tunix's own AR SFT loss, the one `PeftTrainer` uses by default.
      "ar": (
          compat.default_sft_loss,
          ar_batch,
      ),
      "bd_single_canvas": (
          functools.partial(
              loss_lib.sft_loss, config=bd(bd_config_lib.SINGLE_CANVAS)
          ),
          sft_inputs,
      ),
      "bd_clean_context": (
          functools.partial(
              loss_lib.sft_loss, config=bd(bd_config_lib.CLEAN_CONTEXT)
          ),
          sft_inputs,
      ),
  }
  real_tokens = int(np.sum(sft_batch["segment_ids"] > 0))
  states, times, peaks = {}, {name: [] for name in variants}, {}
  with mesh_lib.tunix_context(mesh):
    for name, (loss_fn, batch) in variants.items():
      model = from_scratch.init_model(model_config, config.seed, mesh)
      optimizer = nnx.Optimizer(model, optax.adamw(1e-4), wrt=nnx.Param)
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
    }
  lines = [
      (
          f"SFT step benchmark: batch {config.batch_size} x "
          f"{data.max_length} tokens ({real_tokens} real), block size "
          f"{config.bd.block_size}, {config.num_steps} interleaved steps, "
          f"{jax.device_count()} {jax.devices()[0].platform} device(s)"
      ),
      (
          f"  {'variant':<18}{'tokens/s':>11}{'vs AR':>8}{'step ms':>10}"
          f"{'peak MiB':>10}{'vs AR':>8}"
      ),
  ]
  for name, r in report.items():
    lines.append(
        f"  {name:<18}{r['tokens_per_s']:>11.0f}{r['throughput_vs_ar']:>8.2f}"
        f"{r['step_ms']:>10.1f}{r['peak_bytes'] / 2**20:>10.2f}"
        f"{r['peak_vs_ar']:>8.2f}"
    )
  print("\n".join(lines))
  if config.output:
    report_lib.write_json(config.output, report)
  return report
