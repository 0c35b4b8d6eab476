# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Test-only replay references for `tunix_bd.core.replay`.

* `unpacked_log_probs`: the previous product replay, one `[noisy ; clean]`
  clean-context forward over the whole sequence per step index, with every
  block at its canvas before that step (`step_canvas`).
* `brute_force_log_probs`: one single-canvas forward per row, block and
  step, in NumPy loops.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import canvases
from tunix_bd.core import diffusion_lm
from tunix_bd.core import scoring
from tunix_bd.core import trace as trace_lib


def step_canvas(trace: trace_lib.Trace, step: Any) -> jax.Array:
  """int32 `[batch, prompt_len + T]`: every block's canvas before `step`.

  In the sequence layout: each block holds its prompt tokens and its slots
  committed before `step`, the mask token elsewhere (pads are 0). Block b's
  part is what the denoiser saw at block b's step `step`.
  """
  rows = canvases.sequence(trace)
  # The step after which each real slot is on its canvas: -1 in the prompt.
  steps = jnp.asarray(trace.action_step, jnp.int32)
  committed_at = jnp.pad(
      steps,
      ((0, 0), (rows.tokens.shape[1] - steps.shape[1], 0)),
      constant_values=-1,
  )
  canvas = jnp.where(committed_at < step, rows.tokens, trace.bd.mask_token_id)
  return jnp.where(rows.segment_ids > 0, canvas, 0)


def unpacked_log_probs(model, trace, *, logits_fn=None):
  """Replay with one whole-sequence clean-context forward per step index."""
  logits_fn = logits_fn or diffusion_lm.diffusion_logits_fn
  trace = trace.validate()
  rows = canvases.sequence(trace)
  prompt_len = np.shape(trace.prompt_tokens)[1]
  steps = jnp.asarray(trace.action_step, jnp.int32)
  targets = rows.tokens[:, prompt_len:]
  config = dataclasses.replace(trace.bd, layout=bd_config.CLEAN_CONTEXT)

  def body(total, step):
    logits = logits_fn(
        model,
        step_canvas(trace, step),
        rows.positions,
        rows.segment_ids,
        config=config,
        clean_tokens=rows.tokens,
    )
    logp = scoring.token_log_probs(
        logits[:, prompt_len:], targets, trace.temperature
    )
    return total + jnp.where(steps == step, logp, 0.0), None

  zeros = jnp.zeros(steps.shape, jnp.float32)
  num_steps = int(np.max(np.asarray(trace.action_step))) + 1
  total, _ = jax.lax.scan(body, zeros, jnp.arange(max(num_steps, 1)))
  return total


def brute_force_log_probs(model, trace) -> np.ndarray:
  """One single-canvas forward per row, block and step (NumPy loops)."""
  trace = trace.validate()
  bd = trace.bd
  prompt, lengths, tokens, steps = (
      np.asarray(getattr(trace, f))
      for f in ("prompt_tokens", "prompt_lengths", "tokens", "action_step")
  )
  config = dataclasses.replace(bd, layout=bd_config.SINGLE_CANVAS)
  size = bd.block_size
  length = prompt.shape[1] + tokens.shape[1]
  out = np.zeros(steps.shape, np.float32)
  for row in range(steps.shape[0]):
    start = int(lengths[row])
    sequence = np.zeros(length, np.int64)
    sequence[:start] = prompt[row, :start]
    sequence[start : start + tokens.shape[1]] = tokens[row]
    commit_step = np.full(length, -1)
    commit_step[start : start + tokens.shape[1]] = steps[row]
    for block in np.unique(np.flatnonzero(commit_step >= 0) // size):
      end = (block + 1) * size
      here = np.flatnonzero(
          (np.arange(length) // size == block) & (commit_step >= 0)
      )
      for step in range(commit_step[here].max() + 1):
        canvas = sequence.copy()
        canvas[here[commit_step[here] >= step]] = bd.mask_token_id
        segments = np.arange(length) < min(end, start + tokens.shape[1])
        logits = diffusion_lm.diffusion_logits_fn(
            model,
            canvas[None],
            np.arange(length)[None],
            segments[None].astype(np.int32),
            config=config,
        )
        logp = np.asarray(scoring.log_probs(logits, trace.temperature))[0]
        for i in here[commit_step[here] == step]:
          out[row, i - start] = logp[i, sequence[i]]
  return out
