# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""XLA's peak memory of SFT steps over a grid of shapes, beside the plan.

Compiles (does not run) `bench_sft.py:qwen3_0p6b`'s full fine-tuning steps
(AR, single canvas, clean context) for each number of layers, remat mode
and batch x length of the grid, in bfloat16 compute, and records XLA's
peak (arguments + outputs + temporaries - aliases, as `bench_sft` reports
it) beside `memory_plan.sft_step_plan`'s estimate and the compile time. One
JSON line per step goes to `OUT/sft_memory.jsonl` as it is measured:

  PYTHONPATH=. python tools/tpu/sft_memory.py [--tiny] [--out DIR] \
      [--points LAYERS:REMAT:BATCH:LENGTH[:OPTIMIZER],...] \
      [--variants ar,bd_single_canvas,bd_clean_context]

OPTIMIZER is `train.optimizer`'s (default `adamw`).

`--tiny` compiles one small grid point (a smoke run on a CPU).
"""

import argparse
import itertools
import json
import os
import time

from benchmarks import sft_step
from benchmarks.configs import bench_sft
from benchmarks.recipes import bench_sft as recipe
from tunix_bd import mesh as mesh_lib
from tunix_bd.models import from_scratch

# (layers, remat, (batch, length), optimizer)
_GRID = list(
    itertools.product(
        (2, 4), ("none", "block"), ((16, 512), (4, 1024)), ("adamw",)
    )
)
_TINY_GRID = [(2, "block", (2, 64), "adafactor")]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument(
      "--points",
      default="",
      help="LAYERS:REMAT:BATCH:LENGTH[:OPTIMIZER],... instead of the grid",
  )
  parser.add_argument("--variants", default=",".join(sft_step.VARIANTS))
  parser.add_argument("--out", default=os.environ.get("OUT", "."))
  args = parser.parse_args()
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "sft_memory.jsonl")
  grid = _TINY_GRID if args.tiny else _GRID
  if args.points:
    grid = []
    for point in args.points.split(","):
      layers, remat, batch, length, *rest = point.split(":")
      grid.append((
          int(layers),
          remat,
          (int(batch), int(length)),
          rest[0] if rest else "adamw",
      ))
  variants = tuple(args.variants.split(","))
  for layers, remat, (batch_size, length), optimizer in grid:
    config = bench_sft.get_config("tiny" if args.tiny else "qwen3_0p6b")
    config.model.update(num_layers=layers, remat=remat, dtype="bfloat16")
    config.bench.update(
        batch_size=batch_size,
        variants=("ar", *(v for v in variants if v != "ar")),
        optimizer=optimizer,
    )
    # One example a row: `batch_size` rows of `length` tokens.
    config.data.update(max_length=length, num_train=batch_size, packing=False)
    settings = recipe.validate(config).settings
    arms, batch, tokenizer_size = recipe.prepare(settings)
    length = batch.length
    model_config = settings.model.qwen3_config(tokenizer_size)
    mesh = mesh_lib.make_mesh(settings.mesh)
    with mesh_lib.tunix_context(mesh):
      model = from_scratch.init_model(model_config, 0, mesh)
      state = sft_step.optimizer_state(model, optimizer, 1)
      for name, (loss_fn, inputs) in arms.items():
        if name not in variants:
          continue
        start = time.perf_counter()
        peak = sft_step.peak_bytes(
            sft_step.train_step(loss_fn), model, state, inputs
        )
        row = dict(
            layers=layers,
            remat=remat,
            batch_size=batch_size,
            length=length,
            variant=name,
            optimizer=optimizer,
            peak_mib=round(peak / 2**20, 1),
            plan_mib=round(
                sft_step.planned_bytes(
                    settings.model,
                    model_config.vocab_size,
                    batch_size=batch_size,
                    length=length,
                    variant=name,
                    optimizer=optimizer,
                )
                / 2**20,
                1,
            ),
            compile_s=round(time.perf_counter() - start, 1),
        )
        print(json.dumps(row), flush=True)
        with open(path, "a") as f:
          f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
  main()
