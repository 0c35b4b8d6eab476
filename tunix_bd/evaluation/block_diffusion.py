# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Block-diffusion decoding as a `speed.Decoder`, timed like the AR Sampler."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tunix_bd.evaluation import speed
from tunix_bd.generate import denoise


def denoiser_decoder(
    model: Any,
    tokenizer: Any,
    *,
    bd: Any,
    config: denoise.DenoiseConfig,
) -> speed.Decoder:
  """A `speed.Decoder` of prompt token-id lists by parallel denoising.

  The `Denoiser` is built once, as the AR `Sampler` is, so calls pay for
  decoding alone.
  """
  denoiser = denoise.Denoiser(model, bd=bd, config=config)

  def decode(batch: Sequence[Sequence[int]]) -> speed.BatchOutput:
    out = denoiser(list(batch), seeds=np.arange(len(batch)))
    return speed.BatchOutput(
        texts=[tokenizer.decode(c.tolist()) for c in out.completions],
        num_tokens=np.asarray([len(c) for c in out.completions]),
        num_forwards=out.num_forwards,
        tokens=[c.tolist() for c in out.completions],
    )

  return decode
