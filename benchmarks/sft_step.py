# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""SFT step throughput and memory: AR vs block-diffusion steps, one batch.

`bench_sft` times up to three full fine-tuning steps (`VARIANTS`) on one
model and one batch: plain AR SFT (Tunix's next-token loss, causal mask),
block-diffusion SFT on a single canvas, and block-diffusion SFT in the
clean-context `[noisy ; clean]` layout (the model runs over twice the
length). `measure` interleaves the steps round-robin, so that a noisy,
shared machine slows all alike. Peak memory is XLA's compiled estimate
(arguments + outputs + temporaries) of each step, the same on every run of
a shape; `memory_plan.sft_step_plan`'s paper estimate is reported beside it.
The batch is packed as SFT packs it (`data.packing`); the report gives the
share of its slots that are real tokens.

The typed sections of `bench_sft`'s config (`model`, `bd`, `bench`) are
`benchmarks.sft_step_settings`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, Mapping

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import chips
from benchmarks import memory_plan
from benchmarks import sft_step_settings
from tunix_bd import compat
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import splash_attention
from tunix_bd.models import from_scratch
from tunix_bd.sft import batching
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.sft import loss as loss_lib
from tunix_bd.training import ar
from tunix_bd.training import options

# `ar`, then the block-diffusion steps of both layouts.
VARIANTS = sft_step_settings.VARIANTS


@dataclasses.dataclass(frozen=True)
class Batch:
  """One batch as every variant's loss takes it.

  Attributes:
    ar: Tunix's AR SFT inputs (`ar.ar_model_inputs`).
    diffusion: the block-diffusion loss's inputs (`loss.sft_model_inputs`).
    length: tokens per row (the clean-context step runs twice as many).
    real_tokens: the non-pad tokens, the same for every variant.
    real_token_share: `real_tokens` over the batch's slots.
  """

  ar: Any
  diffusion: Any
  length: int
  real_tokens: int
  real_token_share: float


def block_diffusion(block_size: int, mask_id: int, layout: str):
  """The `BlockDiffusionConfig` of one variant (shifted alignment)."""
  return bd_config_lib.BlockDiffusionConfig(
      block_size=block_size,
      mask_token_id=mask_id,
      alignment=bd_config_lib.SHIFTED,
      layout=layout,
  )


def first_batch(
    data, *, batch_size: int, bd, eos_id: int, packing: bool = False
) -> Batch:
  """The first seeded clean-context SFT batch of `data`, for every variant.

  Per-block noise t ~ U[1e-3, 1], without complementary masks; `packing` as
  `data.packing` (the AR step keeps the packed documents apart too).
  """
  corruption = corruption_lib.SftCorruptionConfig(
      min_noise=1e-3, max_noise=1.0, complementary=False
  )
  batch = next(
      iter(
          batching.sft_batches(
              data,
              batch_size=batch_size,
              corruption=corruption,
              config=bd,
              eos_id=eos_id,
              seed=0,
              packing=packing,
          )
      )
  )
  ar_inputs = ar.ar_model_inputs({
      "tokens": jnp.asarray(batch.tokens),
      "completion_mask": jnp.asarray(batch.completion_mask),
      "valid_mask": jnp.asarray(batch.segment_ids > 0),
      "segment_ids": jnp.asarray(batch.segment_ids),
      "positions": jnp.asarray(batch.positions),
  })
  real = batch.segment_ids > 0
  return Batch(
      ar=ar_inputs,
      diffusion=loss_lib.sft_model_inputs(jax.tree.map(jnp.asarray, batch)),
      length=data.max_length,
      real_tokens=int(np.sum(real)),
      real_token_share=float(np.mean(real)),
  )


def variants(
    names,
    batch: Batch,
    *,
    block_size: int,
    mask_id: int,
    chunk,
    attention: str = splash_attention.DENSE,
) -> dict[str, tuple[Callable[..., Any], Any]]:
  """`{name: (loss_fn, its inputs)}` of the chosen variants, in order; the
  block-diffusion ones with `attention` (`model.attention`)."""
  bd_loss = lambda layout: functools.partial(
      loss_lib.sft_loss,
      config=block_diffusion(block_size, mask_id, layout),
      logits_chunk=chunk,
      attention=attention,
  )
  every = {
      # Tunix's own AR SFT loss, the one `PeftTrainer` uses by default.
      "ar": (compat.default_sft_loss, batch.ar),
      "bd_single_canvas": (
          bd_loss(bd_config_lib.SINGLE_CANVAS),
          batch.diffusion,
      ),
      "bd_clean_context": (
          bd_loss(bd_config_lib.CLEAN_CONTEXT),
          batch.diffusion,
      ),
  }
  return {name: every[name] for name in names}


def train_step(loss_fn: Callable[..., Any]):
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


def peak_bytes(step, model, optimizer, batch) -> int:
  """XLA's compiled peak of `step` (arguments + outputs + temporaries -
  aliases), without running it; -1 where the backend gives no analysis."""
  analysis = step.lower(model, optimizer, batch).compile().memory_analysis()
  if analysis is None:
    return -1
  return int(
      analysis.argument_size_in_bytes
      + analysis.output_size_in_bytes
      + analysis.temp_size_in_bytes
      - analysis.alias_size_in_bytes
  )


def measure(
    arms: Mapping[str, tuple[Callable[..., Any], Any]],
    model_config: Any,
    *,
    seed: int,
    mesh: jax.sharding.Mesh,
    warmup_steps: int,
    num_steps: int,
    optimizer: str = "adamw",
) -> tuple[dict[str, list[float]], dict[str, int], dict[str, float]]:
  """`(seconds of every timed step, peak bytes, compile seconds)` of each arm.

  One model and optimizer state for all arms, whose steps alternate on it
  (the values do not change the cost): the memory of one. Compile seconds
  are those of lowering and compiling the step (`peak_bytes`).
  """
  states, times, peaks, compile_s = {}, {name: [] for name in arms}, {}, {}
  with mesh_lib.tunix_context(mesh):
    model = from_scratch.init_model(model_config, seed, mesh)
    state = optimizer_state(model, optimizer, num_steps)
    for name, (loss_fn, batch) in arms.items():
      step = train_step(loss_fn)
      start = time.perf_counter()
      peaks[name] = peak_bytes(step, model, state, batch)
      compile_s[name] = time.perf_counter() - start
      for _ in range(warmup_steps):
        jax.block_until_ready(step(model, state, batch))
      states[name] = (step, batch)
    for _ in range(num_steps):
      for name, (step, batch) in states.items():
        start = time.perf_counter()
        jax.block_until_ready(step(model, state, batch))
        times[name].append(time.perf_counter() - start)
  return times, peaks, compile_s


def optimizer_state(model, name: str, num_steps: int) -> nnx.Optimizer:
  """`model`'s optimizer state under the recipes' optimizer `name`
  (`options.optimizer`, as SFT runs it) for `num_steps` updates."""
  rule = options.optimizer(
      options.Train(
          optimizer=name,
          learning_rate=1e-4,
          warmup_steps=0,
          max_steps=num_steps,
      )
  )
  return nnx.Optimizer(model, rule, wrt=nnx.Param)


def model_flops(
    shape: memory_plan.ModelShape, *, batch_size: int, length: int, variant: str
) -> float:
  """A training step's model FLOPs: forward and backward, recompute excluded.

  Three times the forward's matmuls: per position the model runs over (the
  `[noisy ; clean]` layout runs over `2 x length`), the attention
  projections and the MLP; per layer the dense attention scores and their
  values (`2 x 2 x T^2 x heads x head_dim`, the mask computed over, as
  Tunix's attention does); the output head over the `length` loss
  positions. What MFU divides by the chip's peak.

  Args:
    shape: the model.
    batch_size: rows.
    length: tokens per row.
    variant: one of `VARIANTS`.
  """
  d, hd = shape.embed_dim, shape.head_dim
  width = 2 * length if variant == "bd_clean_context" else length
  per_position = 2 * d * hd * (2 * shape.num_heads + 2 * shape.num_kv_heads)
  per_position += 2 * 3 * d * shape.hidden_dim
  scores = 4 * width * width * shape.num_heads * hd
  forward = shape.num_layers * (width * per_position + scores)
  forward += 2 * length * d * shape.vocab_size
  return 3.0 * batch_size * forward


def model_shape(
    settings: sft_step_settings.SftStepModelSettings, vocab_size: int
) -> memory_plan.ModelShape:
  """The model's dimensions, as `memory_plan` and `model_flops` take them."""
  return memory_plan.ModelShape(
      settings.num_layers,
      settings.embed_dim,
      settings.hidden_dim,
      settings.num_heads,
      settings.num_kv_heads,
      settings.head_dim,
      vocab_size,
      settings.tie_embeddings,
  )


def planned_bytes(
    settings: sft_step_settings.SftStepModelSettings,
    vocab_size: int,
    *,
    batch_size: int,
    length: int,
    variant: str,
    optimizer: str = "adamw",
) -> int:
  """`memory_plan.sft_step_plan`'s total for one variant."""
  return memory_plan.sft_step_plan(
      model_shape(settings, vocab_size),
      memory_plan.SftStep(
          batch_size=batch_size,
          length=length,
          clean_context=variant == "bd_clean_context",
          autoregressive=variant == "ar",
          dtype_bytes=2 if settings.dtype == "bfloat16" else 4,
          remat=settings.remat,
          logits_chunk=0 if variant == "ar" else settings.logits_chunk,
          # XLA plans a TPU step apart from every other backend's.
          backend="tpu" if jax.devices()[0].platform == "tpu" else "cpu",
          optimizer=optimizer,
          splash=variant != "ar"
          and settings.attention == splash_attention.SPLASH,
      ),
  ).total


def summarize(
    times: Mapping[str, list[float]],
    peaks: Mapping[str, int],
    planned: Mapping[str, int],
    real_tokens: int,
    flops: Mapping[str, float] | None = None,
    *,
    real_token_share: float = 1.0,
    compile_s: Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
  """Per variant: tokens/s, step ms and peak bytes, and their ratios to AR.

  Tokens/s counts the real (non-pad) tokens of the batch, the same for all
  variants, so the ratios compare the cost of learning from the same data;
  `real_token_share` is their share of the batch's slots. With `flops`
  (`model_flops` per variant), `mfu` is the model FLOPs per second over
  this chip's bfloat16 peak (`chips.PEAK_BF16_FLOPS`; None where the chip
  is not listed) and `mfu_real_tokens` its share spent on real tokens
  (`mfu * real_token_share`). `compile_s`: each step's compile seconds.
  """
  peak = chips.peak_flops()
  ar_rate = real_tokens / float(np.median(times["ar"]))
  report = {}
  for name in times:
    rate = real_tokens / float(np.median(times[name]))
    report[name] = {
        "tokens_per_s": rate,
        "throughput_vs_ar": rate / ar_rate,
        "step_ms": 1e3 * float(np.median(times[name])),
        "peak_bytes": peaks[name],
        "peak_vs_ar": peaks[name] / max(peaks["ar"], 1),
        "planned_bytes": planned[name],
        "mfu": (
            None
            if flops is None or peak is None
            else flops[name] / float(np.median(times[name])) / peak
        ),
        "real_token_share": real_token_share,
        "compile_s": None if compile_s is None else compile_s[name],
    }
    mfu = report[name]["mfu"]
    report[name]["mfu_real_tokens"] = (
        None if mfu is None else mfu * real_token_share
    )
  return report


def format_table(
    report: Mapping[str, Mapping[str, float]], caption: list[str]
) -> str:
  """`caption`'s lines, then one row per variant."""
  lines = [
      *caption,
      (
          f"  {'variant':<18}{'tokens/s':>11}{'vs AR':>8}{'step ms':>10}"
          f"{'peak MiB':>10}{'vs AR':>8}{'plan MiB':>10}{'MFU':>7}"
          f"{'real MFU':>9}{'compile s':>10}"
      ),
  ]
  share = lambda x: "-" if x is None else format(x, ".0%")
  for name, r in report.items():
    compile_s = r.get("compile_s")
    lines.append(
        f"  {name:<18}{r['tokens_per_s']:>11.0f}{r['throughput_vs_ar']:>8.2f}"
        f"{r['step_ms']:>10.1f}{r['peak_bytes'] / 2**20:>10.2f}"
        f"{r['peak_vs_ar']:>8.2f}{r['planned_bytes'] / 2**20:>10.2f}"
        f"{share(r.get('mfu')):>7}{share(r.get('mfu_real_tokens')):>9}"
        f"{'-' if compile_s is None else format(compile_s, '.1f'):>10}"
    )
  return "\n".join(lines)
