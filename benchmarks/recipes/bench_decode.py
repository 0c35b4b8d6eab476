# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_decode`: AR vs block-diffusion decoding, side by side.

One run measures, on the same prompts of each workload (tasks and
generation budget): Tunix's stock KV-cached AR `Sampler` on the AR teacher;
the teacher again in our decoding loop with one-token blocks (exactly AR
decoding, so the gap to it is what parallel denoising saves); and parallel
block denoising of the converted model, cache-free and with the exact block
KV cache; at every batch size. Each cell reports tokens/s (returned tokens
over decoding time, compilation excluded), its ratio to Tunix's AR, tokens
per forward and greedy exact match. It then times a stochastic rollout and
the packed replay of its traces (replay time over rollout time)
(`benchmarks.trained_workload`).

Beside each measured speed of our decoding loop it prints the roofline
(`benchmarks.roofline`): the share of the decoding time its model forwards
take (`fwd`, at most 1: its compiled program timed in the same rounds with
and without its model call), the speed-up over our AR loop that an engine
doing nothing but its forwards would reach (`ideal`), the time of one
forward inside each program, and tokens per forward as a fraction of the
workload's ceiling (`ceil`) (`benchmarks.batch_sweep`).

A `kind="random"` workload (`benchmarks.fixed_schedule`) needs no
training: a randomly initialised Qwen3 of a realistic size, decoded with
exactly k commits per step (TPF = k by construction) for each k.

The methods alternate batch by batch (AR, AR loop, cache-free, cached, AR,
...), so a shared, noisy machine slows all of them alike.

With a `peer` section (`benchmarks.peer`), a trained workload whose
block-diffusion checkpoint is a Fast-dLLM v2 directory gets one more
method, `peer`: Fast-dLLM v2's own decoder on the same weights, prompts,
block size and threshold, in a subprocess under its own interpreter, timed
in the same interleaved rounds; the table adds how often its tokens are
ours.
"""

from __future__ import annotations

import contextlib
import functools

import ml_collections

from benchmarks import decode_bench_settings
from benchmarks import decode_table
from benchmarks import fixed_schedule
from benchmarks import trained_workload
from tunix_bd import mesh as mesh_lib
from tunix_bd.evaluation import report
from tunix_bd.run import models as models_lib


def run(config: ml_collections.ConfigDict) -> dict:
  """Prints the side-by-side table and returns it as a dict."""
  # Every workload and setting is checked before any compute.
  bench = decode_bench_settings.validate(config)
  settings = bench.settings
  mesh = mesh_lib.from_section(config.mesh)
  # A checkpoint two workloads share is loaded once.
  models = functools.cache(lambda path: models_lib.load_checkpoint(path, mesh))
  results = {**settings.commit_rule(), "workloads": {}}
  with mesh_lib.tunix_context(mesh), contextlib.ExitStack() as stack:
    for name, workload in bench.workloads.items():
      if isinstance(workload, fixed_schedule.FixedSchedule):
        result = fixed_schedule.measure(
            workload,
            batch_sizes=settings.batch_sizes,
            repeats=settings.repeats,
            mesh=mesh,
        )
      else:
        result = trained_workload.measure(
            workload,
            settings,
            key=f"workload_settings.{name}",
            models=models,
            peer=bench.peer,
            stack=stack,
        )
      results["workloads"][name] = result
  print(decode_table.format_table(results, settings.title()))
  if settings.output:
    report.write_json(settings.output, results)
  return results
