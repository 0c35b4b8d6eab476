# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs a reference implementation's block decoder for `bench_decode`.

`bench_decode`'s peer column times the Fast-dLLM v2 reference decoder on
the checkpoint our side decodes. Their code needs torch and transformers
4.5x, which tunix_bd's environment does not have, so this script runs under
the peer's own interpreter (`peer.python`) and imports nothing of tunix_bd:
only the standard library, torch, transformers, and the user's copy of
their modeling code (`peer.code`, the files of the Hugging Face model
repository Efficient-Large-Model/Fast_dLLM_v2_7B).

The checkpoint is loaded as their users load it, through its `auto_map`
with `trust_remote_code`, from a scratch directory of links to the
checkpoint's files plus the modeling files (the checkpoint itself is not
touched). Each prompt is decoded by their `generate` (batch of one: its
batched path reads stop tokens and truncation from the whole batch),
greedy, with `block_size`, `small_block_size`, `threshold`, `stop_token`
and `use_block_cache` as given. Forwards are counted by wrapping the
model's `forward` (their decoder calls `self.forward`).

Protocol, one JSON object per line:

- first line out: `{"ready": {...}}`, what was loaded (versions, threads,
  parameter count, the sha256 of each modeling file);
- each line in, `{"prompts": [[id, ...], ...]}`, is answered by
  `{"tokens": [[id, ...], ...], "forwards": [n, ...], "seconds": s}`: per
  prompt, every token their decoder appended after it (untruncated), the
  model forwards it took, and the seconds the batch took in here;
- on failure, `{"error": "..."}` and exit status 1.

It stops at the end of its input.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import transformers


def _reply(obj):
  sys.stdout.write(json.dumps(obj) + "\n")
  sys.stdout.flush()


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _scratch_dir(checkpoint, code, files):
  """A directory of links to the checkpoint's files plus the modeling code."""
  scratch = tempfile.mkdtemp(prefix="peer_checkpoint_")
  for name in os.listdir(checkpoint):
    if not name.endswith(".py"):
      os.symlink(
          os.path.join(os.path.abspath(checkpoint), name),
          os.path.join(scratch, name),
      )
  for name in files:
    shutil.copyfile(os.path.join(code, name), os.path.join(scratch, name))
  return scratch


class CountingModel:
  """Counts the calls of a model's `forward` (their decoder's own calls)."""

  def __init__(self, model):
    self.calls = 0
    inner = model.forward

    def forward(*args, **kwargs):
      self.calls += 1
      return inner(*args, **kwargs)

    model.forward = forward


def blocks_to_request(prompt_length, budget, block_size):
  """The `max_new_tokens` that makes `generate` append >= `budget` tokens.

  `generate` decodes `max_new_tokens // block_size` blocks, the first of
  which completes the prompt's last block, and appends one token after the
  last block's cache write: `blocks * block_size - prompt_length %
  block_size + 1` tokens. The fewest blocks reaching `budget`, in tokens.
  """
  tail = prompt_length % block_size
  blocks = max(1, -(-(budget + tail - 1) // block_size))
  return blocks * block_size


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True)
  parser.add_argument("--code", required=True)
  parser.add_argument(
      "--code_files", required=True, help="comma-separated, in --code"
  )
  parser.add_argument("--block_size", type=int, required=True)
  parser.add_argument("--small_block_size", type=int, required=True)
  parser.add_argument("--threshold", type=float, required=True)
  parser.add_argument("--max_new_tokens", type=int, required=True)
  parser.add_argument("--mask_id", type=int, required=True)
  parser.add_argument("--stop_token", type=int, required=True)
  parser.add_argument("--use_block_cache", type=int, default=1)
  args = parser.parse_args()
  files = args.code_files.split(",")
  scratch = _scratch_dir(args.checkpoint, args.code, files)
  try:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        scratch, trust_remote_code=True, torch_dtype=torch.float32
    ).eval()
  finally:
    shutil.rmtree(scratch)
  counter = CountingModel(model)
  _reply({
      "ready": {
          "torch": torch.__version__,
          "transformers": transformers.__version__,
          "threads": torch.get_num_threads(),
          "parameters": sum(p.numel() for p in model.parameters()),
          "code_sha256": {
              name: _sha256(os.path.join(args.code, name)) for name in files
          },
          "decoder": "generate",
          "use_block_cache": bool(args.use_block_cache),
          "small_block_size": args.small_block_size,
      }
  })
  for line in sys.stdin:
    prompts = json.loads(line)["prompts"]
    tokens, forwards = [], []
    start = time.perf_counter()
    with torch.no_grad():
      for prompt in prompts:
        counter.calls = 0
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=blocks_to_request(
                len(prompt), args.max_new_tokens, args.block_size
            ),
            mask_id=args.mask_id,
            threshold=args.threshold,
            small_block_size=args.small_block_size,
            block_size=args.block_size,
            stop_token=args.stop_token,
            temperature=0,
            use_block_cache=bool(args.use_block_cache),
        )
        tokens.append(out[0, len(prompt) :].tolist())
        forwards.append(counter.calls)
    seconds = time.perf_counter() - start
    _reply({"tokens": tokens, "forwards": forwards, "seconds": seconds})


if __name__ == "__main__":
  try:
    main()
  except Exception as e:  # pylint: disable=broad-exception-caught
    _reply({"error": f"{type(e).__name__}: {e}"})
    sys.exit(1)
