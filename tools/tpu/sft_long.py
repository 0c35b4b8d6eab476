# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Long-row SFT steps: dense attention vs the Splash kernel, memory and time.

Compiles and times `bench_sft.py:qwen3_0p6b`'s full fine-tuning step
(Qwen3-0.6B widths, 4 layers, vocabulary 151,936, bfloat16 compute, the
chunked head) at batch 1 over rows of 2,048, 4,096 and 8,192 tokens, both
layouts (`bd_single_canvas`; `bd_clean_context`, whose model row is twice
as long), with `model.attention` `dense` and `splash`
(`core.splash_attention`). For each it records XLA's compiled peak
(arguments + outputs + temporaries - aliases, `sft_step.peak_bytes`), the
compile time and the fastest of 3 timed steps; a step that does not compile
or run (out of memory) records its error instead. One JSON line per step
goes to stdout and `OUT/sft_long.jsonl` as it is measured:

  PYTHONPATH=. python tools/tpu/sft_long.py [--tiny] [--out DIR] \
      [--lengths 2048,4096,8192] [--remat none]

`--tiny` runs a 2-layer model over 128-token rows (a smoke run on a CPU,
the kernel in Pallas interpret mode).
"""

import argparse
import functools
import json
import os
import time

from benchmarks import sft_step
from benchmarks.configs import bench_sft
from benchmarks.recipes import bench_sft as recipe
from flax import nnx
import jax
import optax
import realistic
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import from_scratch
from tunix_bd.sft import loss as loss_lib

_LAYOUTS = (bd_config_lib.SINGLE_CANVAS, bd_config_lib.CLEAN_CONTEXT)
_ATTENTIONS = ("dense", "splash")
# `recipe.prepare`'s mask id: the embedded tokenizer's mask token.
_MASK_ID = tokenizer_lib.build_char_tokenizer().convert_tokens_to_ids(
    tokenizer_lib.MASK_TOKEN
)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--lengths", default="2048,4096,8192")
  parser.add_argument("--remat", default="none")
  parser.add_argument("--out", default=os.environ.get("OUT", "."))
  args = parser.parse_args()
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "sft_long.jsonl")
  lengths = [128] if args.tiny else [int(n) for n in args.lengths.split(",")]
  for length in lengths:
    config = bench_sft.get_config("tiny" if args.tiny else "qwen3_0p6b")
    config.model.update(remat=args.remat, dtype="bfloat16")
    config.bench.update(batch_size=1)
    config.data.update(max_length=length, num_train=1)
    settings = recipe.validate(config).settings
    _, batch, tokenizer_size = recipe.prepare(settings)
    model_config = settings.model.qwen3_config(tokenizer_size)
    mesh = mesh_lib.make_mesh(
        mesh_lib.MeshSettings(fsdp=1, tp=1), jax.devices()[:1]
    )
    with mesh_lib.tunix_context(mesh):
      model = from_scratch.init_model(model_config, 0, mesh)
      optimizer = nnx.Optimizer(model, optax.adamw(1e-4), wrt=nnx.Param)
      for layout in _LAYOUTS:
        for attention in _ATTENTIONS:
          loss_fn = functools.partial(
              loss_lib.sft_loss,
              config=sft_step.block_diffusion(
                  settings.bd.block_size, _MASK_ID, layout
              ),
              logits_chunk=settings.model.chunk,
              attention=attention,
          )
          row = dict(
              device=str(jax.devices()[0].device_kind),
              layers=model_config.num_layers,
              width=model_config.embed_dim,
              vocab=model_config.vocab_size,
              remat=args.remat,
              block_size=settings.bd.block_size,
              length=length,
              layout=layout,
              attention=attention,
          )
          row.update(_measure(loss_fn, model, optimizer, batch.diffusion))
          print(json.dumps(row), flush=True)
          with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _measure(loss_fn, model, optimizer, inputs) -> dict:
  """`peak_mib`, `compile_s` and `step_ms`, or the `error` that stopped it."""
  step = sft_step.train_step(loss_fn)
  start = time.perf_counter()
  try:
    peak = sft_step.peak_bytes(step, model, optimizer, inputs)
  except Exception as e:  # pylint: disable=broad-exception-caught
    return dict(error=f"compile: {type(e).__name__}: {str(e)[:300]}")
  out = dict(
      peak_mib=round(peak / 2**20, 1),
      compile_s=round(time.perf_counter() - start, 1),
  )
  try:
    out["step_ms"] = realistic.fastest_ms(
        lambda: jax.block_until_ready(step(model, optimizer, inputs)), 3
    )
  except Exception as e:  # pylint: disable=broad-exception-caught
    out["error"] = f"run: {type(e).__name__}: {str(e)[:300]}"
  return out


if __name__ == "__main__":
  main()
