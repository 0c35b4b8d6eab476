# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
r"""Writes a random-weight Fast-dLLM v2 checkpoint for `bench_decode:peer`.

The fixture `fast_dllm_v2_tiny` (0.15 M parameters) is too small for a
timing to mean anything; this writes the same format at a size where model
compute is a real part of each forward on a CPU (default: 4 layers, hidden
384, 6 query / 2 KV heads of 64, MLP 1024, 6.6 M parameters), through
Fast-dLLM v2's own code (`auto_map`, `trust_remote_code`) as
`make_fixtures.py` does. The tokenizer is the fixtures' (400 ids plus
`|<MASK>|` at id 400), so the digit tasks' prompts encode.

In the torch environment of tools/bd_formats/README.md, from the
repository root:

  venv-bd-formats/bin/python tools/bd_formats/make_peer_checkpoint.py \
      --fast_dllm_model PATH/TO/Fast_dLLM_v2_7B \
      --out runs/peer/fast_dllm_v2

`--head_std` sets the spread of the logits (their standard deviation is
about head_std * sqrt(hidden)): at the default, confidences spread over
(0, 1) and the threshold decides, so tokens per forward lies between 1 and
the block size rather than at either end.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import common
import fast_dllm_oracle

_FIXTURE = (
    pathlib.Path(__file__).resolve().parents[2]
    / "tunix_bd_tests"
    / "testdata"
    / "bd_formats"
    / "fast_dllm_v2_tiny"
)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--fast_dllm_model", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--layers", type=int, default=4)
  parser.add_argument("--hidden", type=int, default=384)
  parser.add_argument("--heads", type=int, default=6)
  parser.add_argument("--kv_heads", type=int, default=2)
  parser.add_argument("--mlp", type=int, default=1024)
  parser.add_argument("--block_size", type=int, default=8)
  parser.add_argument("--head_std", type=float, default=0.6)
  parser.add_argument("--hidden_std", type=float, default=0.05)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  config = fast_dllm_oracle.config()
  config.update(
      bd_size=args.block_size,
      hidden_size=args.hidden,
      intermediate_size=args.mlp,
      num_attention_heads=args.heads,
      num_key_value_heads=args.kv_heads,
      num_hidden_layers=args.layers,
      max_window_layers=args.layers,
      layer_types=["full_attention"] * args.layers,
      max_position_embeddings=4096,
  )
  common.write_config(out, config)
  common.write_tokenizer(
      _FIXTURE,
      out,
      fast_dllm_oracle.MASK_TOKEN,
      {"additional_special_tokens": ["<|im_start|>", "|<MASK>|"]},
  )
  code = [
      pathlib.Path(args.fast_dllm_model) / name
      for name in fast_dllm_oracle.CODE
  ]
  with common.remote_code(out, code):
    model = common.random_model(
        out,
        config,
        fast_dllm_oracle.generation_config(),
        args.seed,
        (args.head_std, args.hidden_std),
    )
  for stray in out.glob("*.py"):  # save_pretrained copies remote code.
    stray.unlink()
  count = sum(p.numel() for p in model.parameters())
  print(json.dumps({"out": str(out), "parameters": count}))


if __name__ == "__main__":
  main()
