# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Where a decoding iteration's time goes, op by op, on the device.

Profiles (`jax.profiler`) `Denoiser` calls of `bench_decode.py:realistic`'s
random Qwen3 with bfloat16 weights, batch 1, 256 new tokens, for our AR loop
(block 1) and block diffusion at k = 8 (`top_k`), and splits the device time
of an iteration by the code that emitted each op (its JAX name in the
compiled program): the model call's parts (attention, feed-forward, the
head), the loop body's (the commit rule over the vocabulary, the carry's
updates) and XLA's own copies and converts. It also times the same calls
with the model call replaced by a cheap stand-in (the engine alone), and
plain cached forwards of 1, 2, 8 and 16 tokens in a compiled loop
(`benchmarks.roofline`): the bare cost of the fused forwards. Results go to
stdout and `OUT/decode_profile.json` (with each method's compiled program,
`OUT/METHOD.hlo.txt`):

  PYTHONPATH=. python tools/tpu/decode_profile.py [--tiny] [--out DIR] \
      [--methods ar_loop,bd_top8]

`--tiny` runs the same code on a 2-layer model (a smoke run on a CPU, where
ops run on host threads).
"""

import collections
import dataclasses
import glob
import json
import os
import re
import tempfile

from benchmarks import roofline
import jax
import jax.numpy as jnp
import numpy as np
import realistic
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.generate import canvas as canvas_lib
from tunix_bd.generate import decode_loop
from tunix_bd.generate import denoise
from tunix_bd.models import from_scratch
from tunix_bd.models import precision

_PROMPT_LENGTH = 32
_NEW_TOKENS = 256
_MASK_ID = 3
_CALLS = 3
_METHODS = (
    ("ar_loop", 1, dict(rule="threshold", threshold=1.0)),
    ("bd_top8", 8, dict(rule="top_k", top_k=8)),
)
_NAME = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+)(?: = (.*))?$")
_OPCODE = re.compile(r"\s([a-z][\w\-]*)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
# Control flow: their time is their ops' time, counted there.
_CONTAINERS = ("while", "conditional", "call")


def _ops_of(hlo_text: str) -> dict[str, tuple[str, str]]:
  """HLO instruction name -> (opcode, JAX op name) of a compiled program."""
  ops = {}
  for line in hlo_text.splitlines():
    named = _NAME.match(line)
    if not named:
      continue
    opcode = _OPCODE.search(" " + (named.group(2) or ""))
    op_name = _OP_NAME.search(line)
    ops[named.group(1)] = (
        opcode.group(1) if opcode else "?",
        op_name.group(1) if op_name else "",
    )
  return ops


def _part(op_name: str) -> str:
  """The code an op came from: the model call's first named part
  (`attention`, `feed_forward`, ...) or, in the loop body beside it, the
  first name under the innermost loop body (`argmax`, ...)."""
  if not op_name:
    return "(no name: XLA's copies and converts)"
  if "model_call/" in op_name:
    where, inner = "model call", op_name.split("model_call/", 1)[1]
  else:
    where, inner = "loop body", op_name.rsplit("while/body/", 1)[-1]
  inner = [p for p in inner.split("/") if p not in ("cond", "while", "body")]
  return f"{where}: {inner[0] if inner else '-'}"


def _device_ops(xplane: str) -> tuple[dict[str, float], list[str]]:
  """Total device time (us) of each HLO op in a trace, and the line names."""
  data = jax.profiler.ProfileData.from_file(xplane)
  totals = collections.defaultdict(float)
  seen = []
  device = [p for p in data.planes if p.name.startswith("/device:")]
  for plane in device or [p for p in data.planes if p.name == "/host:CPU"]:
    for line in plane.lines:
      seen.append(f"{plane.name}/{line.name}")
      if device and line.name != "XLA Ops":
        continue
      for event in line.events:
        stats = dict(event.stats)
        if not device and "hlo_op" not in stats:
          continue
        # On a TPU an event is named by its HLO text: `%name = ...`.
        name = stats.get("hlo_op") or _NAME.match(event.name).group(1)
        totals[name] += event.duration_ns / 1e3
  return dict(totals), seen


def _engine_only(vocab):
  """A cached model call that runs no model: logits from the tokens."""

  def call(model, tokens, positions, segments, cache, *, config, **kwargs):
    del model, positions, segments, config, kwargs
    # Ids 10 and 11: never the mask token, and still data-dependent.
    logits = jax.nn.one_hot(10 + tokens % 2, vocab, dtype=jnp.float32)
    return logits, cache

  return call


def main():
  args = realistic.parse_args(
      __doc__.split("\n")[0], tuple(m for m, _, _ in _METHODS)
  )
  shape, vocab = realistic.model_shape(args.tiny)
  mesh = mesh_lib.make_mesh(
      mesh_lib.MeshSettings(fsdp=1, tp=1), jax.devices()[:1]
  )
  config = from_scratch.qwen3_config(shape, vocab)
  config = dataclasses.replace(config, dtype=jnp.bfloat16)
  model = from_scratch.init_model(config, 0, mesh)
  precision.matrices_to_compute_dtype(model, "bfloat16")
  prompts = [np.random.default_rng(0).integers(10, 200, _PROMPT_LENGTH)]
  result = dict(device=str(jax.devices()[0].device_kind))
  os.makedirs(args.out, exist_ok=True)
  for method, block_size, rule in _METHODS:
    if method not in args.methods:
      continue
    bd = bd_config_lib.BlockDiffusionConfig(block_size, _MASK_ID)
    settings = denoise.DenoiseConfig(
        max_new_tokens=_NEW_TOKENS, max_prompt_length=_PROMPT_LENGTH, **rule
    )
    denoiser = denoise.Denoiser(model, bd=bd, config=settings)
    engine = denoise.Denoiser(
        model, bd=bd, config=settings, cached_logits_fn=_engine_only(vocab)
    )
    out = denoiser(prompts)
    iterations = int(out.num_forwards[0])
    entry = dict(
        iterations=iterations,
        call_ms=realistic.fastest_ms(lambda: denoiser(prompts), 5),
        engine_only_call_ms=realistic.fastest_ms(lambda: engine(prompts), 5),
    )
    # The compiled program's metadata names each op's source line.
    layout = denoiser._layout  # pylint: disable=protected-access
    canvas = canvas_lib.build_canvas(
        np.asarray(prompts), np.asarray([_PROMPT_LENGTH]), layout, _MASK_ID
    )
    hlo = (
        decode_loop.decode.lower(
            denoiser._graphdef,  # pylint: disable=protected-access
            denoiser._state,  # pylint: disable=protected-access
            canvas_lib.pack_inputs(canvas, np.zeros(1, np.uint32)),
            denoiser._params,  # pylint: disable=protected-access
            denoiser._stop_ids,  # pylint: disable=protected-access
            bd=bd,
            layout=layout,
            use_cache=True,
        )
        .compile()
        .as_text()
    )
    with open(os.path.join(args.out, f"{method}.hlo.txt"), "w") as f:
      f.write(hlo)
    instructions = _ops_of(hlo)
    trace_dir = tempfile.mkdtemp()
    with jax.profiler.trace(trace_dir):
      for _ in range(_CALLS):
        denoiser(prompts)
    (xplane,) = glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)
    ops, lines = _device_ops(xplane)
    per_iteration = _CALLS * iterations
    buckets = collections.defaultdict(float)
    loops = {}
    rows = []
    for name, us in sorted(ops.items(), key=lambda kv: -kv[1]):
      opcode, op_name = instructions.get(name, ("?", ""))
      if opcode in _CONTAINERS:
        if opcode == "while":
          loops[name] = us / per_iteration
        continue
      buckets[_part(op_name)] += us / per_iteration
      rows.append(
          dict(
              op=name,
              opcode=opcode,
              us_per_iteration=round(us / per_iteration, 2),
              op_name=op_name[-160:],
          )
      )
    entry.update(
        # The outermost loop's time (the nested loops run inside it).
        while_us_per_iteration=round(max(loops.values(), default=0), 1),
        loops_us_per_iteration={k: round(v, 1) for k, v in loops.items()},
        leaf_ops_us_per_iteration=round(sum(buckets.values()), 1),
        parts_us_per_iteration={
            k: round(v, 1)
            for k, v in sorted(buckets.items(), key=lambda kv: -kv[1])
        },
        top_ops=rows[:80],
        profile_lines=lines[:40],
    )
    result[method] = entry
    print(
        method, json.dumps({k: v for k, v in entry.items() if k != "top_ops"})
    )
    for row in rows[:25]:
      print("  ", row, flush=True)
  # Plain cached forwards (no cache write) by width: what the
  # fused forward of a block's first step (2 tokens for the AR loop, 16 at
  # block 8) would cost bare.
  widths = ((1, 1), (2, 1), (8, 8), (16, 8))
  costs = roofline.forward_seconds([
      roofline.Forward(
          model,
          batch_size=1,
          width=width,
          cache_size=_PROMPT_LENGTH + _NEW_TOKENS,
          context=128,
          block_size=block_size,
      )
      for width, block_size in widths
  ])
  result["plain_forward_us"] = {
      f"{width} tokens": round(c * 1e6, 1)
      for (width, _), c in zip(widths, costs)
  }
  print("plain_forward_us", result["plain_forward_us"], flush=True)
  with open(os.path.join(args.out, "decode_profile.json"), "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
