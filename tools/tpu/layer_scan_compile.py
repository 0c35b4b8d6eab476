# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Compile time of one SFT loss-and-gradient program, layers scanned or not.

Lowers and compiles `sft.loss.sft_loss`'s value and gradient (the
`[noisy ; clean]` layout, the chunked head, as `sft.py` runs) for a random
Qwen3 of each depth, with `model.scan_layers` on and off, without running
it: the weights are abstract, so the full Qwen3-0.6B shape costs no
memory. Prints one JSON line per depth and setting (trace and compile
seconds, XLA's peak estimate):

  PYTHONPATH=. python tools/tpu/layer_scan_compile.py [--tiny] [--layers 2,16]

`--tiny` is a 32-wide model on 2 rows of 64 tokens (a CPU run); otherwise
Qwen3-0.6B's widths on 4 rows of 512 tokens, bfloat16 compute.
"""

import argparse
import dataclasses
import json
import time

from flax import nnx
import jax
import jax.numpy as jnp
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.core import bd_config
from tunix_bd.sft import loss as loss_lib
from tunix_bd.sft import micro_batches


def _config(tiny: bool, layers: int) -> qwen3_lib.ModelConfig:
  if tiny:
    return qwen3_lib.ModelConfig(
        num_layers=layers,
        vocab_size=128,
        embed_dim=32,
        hidden_dim=64,
        num_heads=2,
        head_dim=16,
        num_kv_heads=1,
        rope_theta=1_000_000,
        norm_eps=1e-6,
        use_tied_embedding=False,
        use_flash_attention=False,
    )
  return dataclasses.replace(
      qwen3_lib.ModelConfig.qwen3_0p6b(),
      num_layers=layers,
      dtype=jnp.bfloat16,
      use_flash_attention=False,
  )


def _batch(rows: int, length: int) -> micro_batches.SftBatch:
  ints = jax.ShapeDtypeStruct((rows, length), jnp.int32)
  floats = jax.ShapeDtypeStruct((rows, length), jnp.float32)
  return micro_batches.SftBatch(
      tokens=ints,
      noisy_tokens=ints,
      positions=ints,
      segment_ids=ints,
      completion_mask=jax.ShapeDtypeStruct((rows, length), jnp.bool_),
      corruption_mask=jax.ShapeDtypeStruct((rows, length), jnp.bool_),
      loss_weights=floats,
      noise_level=floats,
      global_weight=jax.ShapeDtypeStruct((rows,), jnp.float32),
      accumulation_steps=jax.ShapeDtypeStruct((rows,), jnp.int32),
  )


def measure(tiny: bool, layers: int, scan_layers: bool) -> dict:
  """Seconds to trace and to compile the program, and XLA's peak bytes."""
  config = _config(tiny, layers)
  abstract = nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0)))
  graphdef, params = nnx.split(abstract)
  bd = bd_config.BlockDiffusionConfig(
      block_size=4 if tiny else 32,
      mask_token_id=3,
      layout=bd_config.CLEAN_CONTEXT,
  )

  def step(params, batch):
    def loss_of(params):
      model = nnx.merge(graphdef, params)
      return loss_lib.sft_loss(
          model, batch, config=bd, logits_chunk=8192, scan_layers=scan_layers
      )[0]

    return jax.value_and_grad(loss_of)(params)

  start = time.perf_counter()
  lowered = jax.jit(step).lower(
      params, _batch(*((2, 64) if tiny else (4, 512)))
  )
  traced = time.perf_counter()
  compiled = lowered.compile()
  done = time.perf_counter()
  memory = compiled.memory_analysis()
  peak = -1
  if memory is not None:
    peak = (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        + memory.temp_size_in_bytes
        - memory.alias_size_in_bytes
    )
  return {
      "layers": layers,
      "scan_layers": scan_layers,
      "trace_s": round(traced - start, 2),
      "compile_s": round(done - traced, 2),
      "peak_bytes": int(peak),
      "backend": jax.default_backend(),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--layers", default="2,16")
  args = parser.parse_args()
  for layers in (int(n) for n in args.layers.split(",")):
    for scan_layers in (True, False):
      print(json.dumps(measure(args.tiny, layers, scan_layers)), flush=True)


if __name__ == "__main__":
  main()
