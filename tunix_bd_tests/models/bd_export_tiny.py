# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
r"""Deterministic tiny block-diffusion models of ours, exported in a format.

One per export format: a 2-layer Tunix Qwen3 trained same-position (SDAR's
layers and alignment, block 4) and a 2-layer Tunix Qwen2 trained shifted
(Fast-dLLM v2's, block 8), with weights drawn by NumPy from a fixed seed
(the same on every machine), over the fixtures' 401-token tokenizer whose
`|<MASK>|` (id 400) is the mask. `bd_export_formats_test` re-creates the
exports; `tools/bd_formats/export_oracle.py` runs this module to write them
for the formats' own code:

  python -m tunix_bd_tests.models.bd_export_tiny OUT [--reference_code FMT=DIR]

writes `OUT/sdar/` and `OUT/fast_dllm_v2/`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from flax import nnx
import jax.numpy as jnp
import numpy as np
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.core import bd_config
from tunix_bd.core import families
from tunix_bd.core import rng
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats

_TOKENIZER_DIR = os.path.join(
    os.path.dirname(os.path.dirname(__file__)),
    "testdata",
    "bd_formats",
    "fast_dllm_v2_tiny",
)
MASK_ID = 400
VOCAB_SIZE = 416  # Spare rows past the tokenizer, as both formats have.
# Weight scales: embeddings and head wide enough that confidences spread
# over (0, 1) and a threshold decides, as the import fixtures'.
_EMBED_STD, _HIDDEN_STD = 1.0, 0.2


@dataclasses.dataclass(frozen=True)
class Tiny:
  """One tiny model: its Tunix config, block-diffusion settings and seed."""

  model_config: Any
  bd: bd_config.BlockDiffusionConfig
  seed: int


_SHAPE = dict(
    num_layers=2,
    vocab_size=VOCAB_SIZE,
    embed_dim=64,
    hidden_dim=192,
    num_heads=4,
    num_kv_heads=2,
    rope_theta=1_000_000,
    norm_eps=1e-6,
    use_tied_embedding=False,
)
TINY = {
    bd_formats.SDAR: Tiny(
        qwen3_lib.ModelConfig(head_dim=32, **_SHAPE),
        bd_config.BlockDiffusionConfig(
            block_size=4,
            mask_token_id=MASK_ID,
            alignment=bd_config.SAME_POSITION,
            layout=bd_config.CLEAN_CONTEXT,
        ),
        seed=0,
    ),
    bd_formats.FAST_DLLM_V2: Tiny(
        qwen2_lib.ModelConfig(head_dim=16, **_SHAPE),
        bd_config.BlockDiffusionConfig(
            block_size=8,
            mask_token_id=MASK_ID,
            alignment=bd_config.SHIFTED,
            layout=bd_config.CLEAN_CONTEXT,
        ),
        seed=1,
    ),
}


def tokenizer() -> Any:
  """Our tokenizer: EOS `<|im_end|>` (2), pad `<|endoftext|>` (0)."""
  return tokenizer_lib.load_tokenizer(_TOKENIZER_DIR)


def model(fmt: str) -> Any:
  """The format's tiny Tunix model, its weights drawn by NumPy.

  Every parameter, in sorted path order: norm scales 1 + N(0, 0.1^2),
  biases N(0, 0.02^2), the embedding and head N(0, 1), other matrices
  N(0, 0.2^2); the head's columns of the mask and spare ids are zero (their
  logit is 0, far below the best word's, so no decoder picks them).
  """
  tiny = TINY[fmt]
  config = tiny.model_config
  abstract = nnx.eval_shape(
      lambda: families.model_class(config)(config, rngs=rng.rngs(0))
  )
  graphdef, state = nnx.split(abstract)
  draws = np.random.default_rng(tiny.seed)
  flat = dict(state.flat_state())
  for path in sorted(flat, key=lambda p: ".".join(map(str, p))):
    name = ".".join(map(str, path))
    shape = flat[path].get_value().shape
    if "norm" in name:
      value = 1.0 + 0.1 * draws.standard_normal(shape)
    elif "bias" in name:
      value = 0.02 * draws.standard_normal(shape)
    elif "embed" in name or "lm_head" in name:
      value = _EMBED_STD * draws.standard_normal(shape)
    else:
      value = _HIDDEN_STD * draws.standard_normal(shape)
    if name == "lm_head.w":  # [embed, vocab]
      value[:, MASK_ID:] = 0.0
    flat[path].set_value(jnp.asarray(value, jnp.float32))
  return nnx.merge(graphdef, state)


def export(fmt: str, export_dir: str, reference_code: str = "") -> None:
  """Exports the format's tiny model as a run's export step does."""
  bd_export.export_block_diffusion(
      model(fmt),
      tokenizer(),
      export_dir,
      bd=TINY[fmt].bd,
      chat_options=chat.ChatOptions(),
      source=None,
      fmt=fmt,
      reference_code=reference_code,
  )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("out")
  parser.add_argument(
      "--reference_code",
      action="append",
      default=[],
      help="FMT=DIR: copy that format's modeling files from DIR",
  )
  args = parser.parse_args()
  code = dict(item.split("=", 1) for item in args.reference_code)
  for fmt in TINY:
    export(fmt, os.path.join(args.out, fmt), code.get(fmt, ""))


if __name__ == "__main__":
  main()
