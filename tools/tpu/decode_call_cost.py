# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What a decoding call costs before its iterations, and what one costs.

On an accelerator a call pays fixed costs (launching the program, moving its
inputs and outputs, work outside the loop such as casting or relaying out
the weights) that a small model's forward does not hide. This times
`Denoiser` calls of `bench_decode.py:realistic`'s random Qwen3 at batch 1
over 8 and 256 new tokens and splits each into a fixed cost and a cost per
loop iteration, for float32, bfloat16 compute on float32 weights, and
bfloat16 weights (`precision.matrices_to_compute_dtype`, what decoding
recipes store), and splits the 8-token call into its compiled program
(with its transfers) and the host's work around it; it also checks that the
last two give the same tokens, and times the machine's floor (a trivial
jitted call, with and without a small transfer each way). Results go to stdout and `OUT/decode_call_cost.json`:

  PYTHONPATH=. python tools/tpu/decode_call_cost.py [--tiny] [--out DIR]

`--tiny` runs the same code on a 2-layer model (a smoke run on a CPU).
"""

import dataclasses
import json
import os

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
_MASK_ID = 3
_VARIANTS = (  # label, compute dtype, matrices stored in it
    ("float32", "float32", False),
    ("bf16_compute", "bfloat16", False),
    ("bf16_weights", "bfloat16", True),
)
_METHODS = (
    ("ar_loop", 1, dict(rule="threshold", threshold=1.0)),
    ("bd_top8", 8, dict(rule="top_k", top_k=8)),
)


def _program_only(denoiser, prompts):
  """A call of `denoiser`'s compiled program alone, inputs packed before."""
  # pylint: disable=protected-access
  layout = denoiser._layout
  lengths = np.asarray([len(p) for p in prompts])
  canvas = canvas_lib.build_canvas(
      np.asarray(prompts), lengths, layout, denoiser.bd.mask_token_id
  )
  packed = canvas_lib.pack_inputs(canvas, np.zeros(len(prompts), np.uint32))
  return lambda: np.asarray(
      decode_loop.decode(
          denoiser._graphdef,
          denoiser._state,
          packed,
          denoiser._params,
          denoiser._stop_ids,
          bd=denoiser.bd,
          layout=layout,
          use_cache=denoiser._use_cache,
          **denoiser._logits_fns,
      )
  )


def main():
  args = realistic.parse_args(__doc__.split("\n")[0])
  shape, vocab = realistic.model_shape(args.tiny)
  mesh = mesh_lib.make_mesh(
      mesh_lib.MeshSettings(fsdp=1, tp=1), jax.devices()[:1]
  )
  one = jnp.ones((1,), jnp.int32)
  add_one = jax.jit(lambda x: x + 1)
  small = np.ones((1, 3), np.int32)
  result = dict(
      device=str(jax.devices()[0].device_kind),
      launch_floor_ms=realistic.fastest_ms(
          lambda: jax.block_until_ready(add_one(one)), 30
      ),
      launch_and_transfers_floor_ms=realistic.fastest_ms(
          lambda: np.asarray(add_one(small)), 30
      ),
  )
  prompts = [np.random.default_rng(0).integers(10, 200, _PROMPT_LENGTH)]
  tokens = {}
  for label, dtype, store in _VARIANTS:
    config = from_scratch.qwen3_config(shape, vocab)
    config = dataclasses.replace(config, dtype=jnp.dtype(dtype))
    model = from_scratch.init_model(config, 0, mesh)
    if store:
      precision.matrices_to_compute_dtype(model, dtype)
    for method, block_size, rule in _METHODS:
      bd = bd_config_lib.BlockDiffusionConfig(block_size, _MASK_ID)
      runs = []
      for new_tokens in (8, 256):
        denoiser = denoise.Denoiser(
            model,
            bd=bd,
            config=denoise.DenoiseConfig(
                max_new_tokens=new_tokens,
                max_prompt_length=_PROMPT_LENGTH,
                **rule,
            ),
        )
        out = denoiser(prompts)
        tokens[label, method] = out.completion_tokens.tolist()
        repeats = 15 if new_tokens == 8 else 5
        runs.append((
            realistic.fastest_ms(lambda: denoiser(prompts), repeats),
            int(out.num_forwards[0]),
            realistic.fastest_ms(_program_only(denoiser, prompts), repeats),
        ))
      (short_ms, short_n, program_ms), (long_ms, long_n, _) = runs
      per_iteration = (long_ms - short_ms) / (long_n - short_n)
      result[f"{label}/{method}"] = dict(
          call_ms=[short_ms, long_ms],
          forwards=[short_n, long_n],
          ms_per_iteration=round(per_iteration, 4),
          fixed_ms=round(short_ms - short_n * per_iteration, 3),
          # Of the 8-token call: the compiled program with its transfers,
          # and the host's work around it (inputs, outputs, the trace).
          program_ms=program_ms,
          host_ms=round(short_ms - program_ms, 3),
      )
      print(label, method, result[f"{label}/{method}"], flush=True)
  for method, _, _ in _METHODS:
    same = tokens["bf16_compute", method] == tokens["bf16_weights", method]
    result[f"same_tokens/{method}"] = same
  print(json.dumps(result, indent=1))
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "decode_call_cost.json"), "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  main()
