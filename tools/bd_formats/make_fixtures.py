# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
r"""Regenerates tunix_bd_tests/testdata/bd_formats/ with the formats' own code.

Writes two tiny random-weight checkpoints, one in SDAR's format
(`sdar_tiny/`) and one in Fast-dLLM v2's (`fast_dllm_v2_tiny/`), and in each
an `oracle.npz` of what the format's own PyTorch code computes on it:
inference and training logits, and its block decoder's greedy tokens.
tunix_bd's tests read these without torch.

The reference code is not part of this repository (nor copied into the
fixtures): pass checkouts of it.

- `--sdar_repo`: a checkout of github.com/JetAstra/SDAR (uses
  `training/model/SDAR-4B-Chat/{modeling_sdar,configuration_sdar,
  fused_linear_diffusion_cross_entropy}.py` and `generate.py`).
- `--fast_dllm_model`: the files of the Hugging Face model repository
  Efficient-Large-Model/Fast_dLLM_v2_7B (uses `modeling.py` and
  `configuration.py`; the weights are not needed).
- `--fast_dllm_repo`: a checkout of github.com/NVlabs/Fast-dLLM (uses
  `v2/generation_functions.py`).

It needs an environment of its own, with the transformers both reference
codes were written against (SDAR's imports fail on transformers 5; see
tools/bd_formats/README.md):

  python3 -m venv venv-bd-formats
  venv-bd-formats/bin/pip install torch transformers==4.53.1 \
      safetensors numpy einops

and then, from the repository root:

  venv-bd-formats/bin/python tools/bd_formats/make_fixtures.py \
      --sdar_repo PATH/TO/SDAR --fast_dllm_model PATH/TO/Fast_dLLM_v2_7B \
      --fast_dllm_repo PATH/TO/Fast-dLLM

`--base_tokenizer` defaults to the fixtures' own tokenizer.json (already
holding the mask token), so a rerun rewrites the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

# Both reference training forwards call a torch.compile'd flex attention,
# which CPU inductor cannot lower (SDAR asks for return_lse); run it eagerly.
# Must be set before torch is imported.
os.environ["TORCHDYNAMO_DISABLE"] = "1"

import common  # pylint: disable=g-import-not-at-top,g-bad-import-order

_REPO = pathlib.Path(__file__).resolve().parents[2]
_OUT = _REPO / "tunix_bd_tests" / "testdata" / "bd_formats"


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sdar_repo", required=True)
  parser.add_argument("--fast_dllm_model", required=True)
  parser.add_argument("--fast_dllm_repo", required=True)
  parser.add_argument("--out", default=str(_OUT))
  parser.add_argument(
      "--base_tokenizer",
      default=None,
      help=(
          "directory with the 400-id base tokenizer.json (default: each"
          " fixture's own)"
      ),
  )
  parser.add_argument("--only", choices=("sdar", "fast_dllm_v2"))
  args = parser.parse_args()
  common.use_cpu_flash_attn()
  out = pathlib.Path(args.out)
  metas = {}
  if args.only in (None, "sdar"):
    import sdar_oracle  # pylint: disable=g-import-not-at-top

    target = out / "sdar_tiny"
    metas["sdar"] = sdar_oracle.build(
        target, args.sdar_repo, args.base_tokenizer or target
    )
  if args.only in (None, "fast_dllm_v2"):
    import fast_dllm_oracle  # pylint: disable=g-import-not-at-top

    target = out / "fast_dllm_v2_tiny"
    metas["fast_dllm_v2"] = fast_dllm_oracle.build(
        target,
        args.fast_dllm_model,
        args.fast_dllm_repo,
        args.base_tokenizer or target,
    )
  print(json.dumps(metas, indent=1, sort_keys=True))


if __name__ == "__main__":
  main()
