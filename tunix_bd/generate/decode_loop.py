# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The compiled block-denoising loop behind `denoise.generate`.

One `lax.while_loop` runs all of decoding; each iteration is one model
forward and one denoising step of the current block. On the cached path the
first step of a block is fused with the cache write of the clean block
before it (or with the prompt prefill): one forward over both, the earlier
one committed to the cache (`block_cache`, `commit_length`), so writing the
cache costs no forward of its own. Shapes depend only on the
`Layout` and the batch size, and the commit rule, its parameters and the
temperature are traced values, so one compiled program serves every setting
of a given geometry (and number of stop ids).

Physical layout: row r is left-padded by whole blocks so that its first block
to denoise (logical block `P_r // block_size`) sits at physical block
`layout.first` in every row; `layout.blocks` blocks follow. Loop index j is
the j-th block each row denoises.
"""

from __future__ import annotations

import dataclasses
import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.generate import commit_rules
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import block_cache
from tunix_bd.core import diffusion_lm


@dataclasses.dataclass(frozen=True)
class Layout:
  """Static geometry of a batch.

  Attributes:
    block_size: tokens per block.
    first: physical block of every row's first block to denoise; the prompt
      blocks before it are prefilled.
    blocks: blocks to denoise, the most any row can need.
    max_new_tokens: completion positions per row.
  """

  block_size: int
  first: int
  blocks: int
  max_new_tokens: int

  @classmethod
  def create(
      cls, block_size: int, max_prompt_length: int, max_new_tokens: int
  ) -> Layout:
    # A completion starting at the last offset of a block spans the most.
    blocks = (max_new_tokens + block_size - 2) // block_size + 1
    return cls(
        block_size, max_prompt_length // block_size, blocks, max_new_tokens
    )

  @property
  def length(self) -> int:
    return (self.first + self.blocks) * self.block_size


def build_canvas(
    prompts: np.ndarray, lengths: np.ndarray, layout: Layout, mask_id: int
) -> dict[str, np.ndarray]:
  """The initial physical canvas and each row's geometry.

  Args:
    prompts: int `[batch, width]` right-padded prompts.
    lengths: int `[batch]` prompt lengths, >= 1 and <= `width`.
    layout: the static geometry.
    mask_id: the mask token id.

  Returns:
    `tokens`, `positions`, `segments` (int32 `[batch, length]`),
    `completion` (bool `[batch, length]`), `first_block` and `num_blocks`
    (int32 `[batch]`: the row's first logical block to denoise and how many
    it has) and `offsets` (int `[batch]`: the physical index of logical
    position 0).
  """
  size, total = layout.block_size, layout.max_new_tokens
  first_block = lengths // size
  offsets = (layout.first - first_block) * size
  logical = np.arange(layout.length)[None, :] - offsets[:, None]
  real = (logical >= 0) & (logical < (lengths + total)[:, None])
  completion = real & (logical >= lengths[:, None])
  prompt_at = np.take_along_axis(
      prompts, np.clip(logical, 0, prompts.shape[1] - 1), axis=1
  )
  tokens = np.where(completion, mask_id, np.where(real, prompt_at, 0))
  num_blocks = (lengths + total - 1) // size - first_block + 1
  return dict(
      tokens=tokens.astype(np.int32),
      positions=np.where(real, logical, 0).astype(np.int32),
      segments=real.astype(np.int32),
      completion=completion,
      first_block=first_block.astype(np.int32),
      num_blocks=num_blocks.astype(np.int32),
      offsets=offsets,
  )


def _scaled_log_probs(logits, temperature):
  """`diffusion_lm.log_probs` for a traced temperature > 0."""
  masked_logit = jnp.float32(diffusion_lm.MASKED_LOGIT)
  scaled = jnp.where(logits <= masked_logit, masked_logit, logits / temperature)
  return jax.nn.log_softmax(scaled, axis=-1)


def _select_commits(params, confidence, eligible):
  """The commit mask of the traced rule `params["rule"]` (an index)."""
  # A switch runs only the selected rule's computation.
  branches = [
      functools.partial(
          commit_rules.commit_mask,
          rule,
          threshold=params["threshold"],
          top_k=params["top_k"],
          factor=params["factor"],
      )
      for rule in commit_rules.RULES
  ]
  return jax.lax.switch(params["rule"], branches, confidence, eligible)


@functools.partial(jax.jit, static_argnames=("bd", "layout", "use_cache"))
def decode(
    graphdef,
    state,
    inputs: dict[str, jax.Array],
    seeds: jax.Array,
    params: dict[str, jax.Array],
    stop_ids: jax.Array,
    *,
    bd: bd_config_lib.BlockDiffusionConfig,
    layout: Layout,
    use_cache: bool,
) -> dict[str, jax.Array]:
  """Denoises a batch; see `denoise.generate` for the semantics.

  Args:
    graphdef: the model's `nnx.split` graph.
    state: the model's `nnx.split` state.
    inputs: `build_canvas` output without `offsets`.
    seeds: uint32 `[batch]` per-row RNG seeds.
    params: traced scalars `rule` (index into `commit_rules.RULES`),
      `threshold`, `top_k`, `factor` and `temperature` (0 = greedy).
    stop_ids: int32 `[num_stop_ids]` ids that stop a row.
    bd: the block-diffusion settings.
    layout: the static geometry.
    use_cache: decode with the block KV cache.

  Returns:
    Physical `[batch, length]` `canvas`, `steps_at` (-1 if never committed)
    and `logp_at`; per-row `forwards`, `num_steps` and `nonfinite`.
  """
  model = nnx.merge(graphdef, state)
  size = layout.block_size
  tokens, positions, segments = (
      inputs["tokens"],
      inputs["positions"],
      inputs["segments"],
  )
  completion = inputs["completion"]
  first_block, num_blocks = inputs["first_block"], inputs["num_blocks"]
  batch, length = tokens.shape
  bd = dataclasses.replace(bd, layout=bd_config_lib.SINGLE_CANVAS)
  greedy = params["temperature"] == 0
  # Greedy decoding samples nothing; its log-probs are at temperature 1.
  temperature = jnp.where(greedy, 1.0, params["temperature"])
  keys = jax.vmap(jax.random.key)(seeds)

  def block_slice(x, j):
    start = (layout.first + j) * size
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=1)

  def put_block(x, j, value):
    start = (layout.first + j) * size
    return jax.lax.dynamic_update_slice_in_dim(x, value, start, axis=1)

  def sample(logp, j, s):
    # One stream per row keyed by (seed, logical block, step): a row's
    # samples never depend on its batch mates.
    step_keys = jax.vmap(
        lambda k, b: jax.random.fold_in(jax.random.fold_in(k, b), s)
    )(keys, first_block + j)
    return jax.vmap(jax.random.categorical)(step_keys, logp).astype(jnp.int32)

  def canvas_logits(canvas, j):
    return block_slice(
        diffusion_lm.diffusion_logits_fn(
            model, canvas, positions, segments, config=bd
        ),
        j,
    )

  def cached_logits(canvas, cache, j, fuse):
    """Block j's logits and the cache, written up to block j if `fuse`."""

    def chunk_logits(start, width):
      # Physical blocks [start, first + j]: the clean blocks to commit, then
      # block j's canvas.
      def chunk(x):
        return jax.lax.dynamic_slice_in_dim(
            x, start * size, width * size, axis=1
        )

      logits, kept = block_cache.block_logits_with_cache(
          model,
          chunk(canvas),
          chunk(positions),
          chunk(segments),
          cache,
          config=bd,
          commit_length=(width - 1) * size,
      )
      return logits[:, -size:], kept

    def step():
      logits, _ = block_cache.block_logits_with_cache(
          model,
          block_slice(canvas, j),
          block_slice(positions, j),
          block_slice(segments, j),
          cache,
          config=bd,
      )
      return logits, cache

    branches = [step, lambda: chunk_logits(layout.first + j - 1, 2)]
    if layout.first:
      branches.append(lambda: chunk_logits(0, layout.first + 1))
    # 0: a plain step; 1: also write block j - 1; 2: also prefill the prompt.
    branch = jnp.where(fuse, jnp.where(j == 0, 2, 1), 0)
    return jax.lax.switch(branch, branches)

  def body(carry):
    j, s, fuse = carry["j"], carry["s"], carry["fuse"]
    blk_tokens = block_slice(carry["canvas"], j)
    blk_steps = block_slice(carry["steps_at"], j)
    blk_completion = block_slice(completion, j)
    if use_cache:
      logits, cache = cached_logits(carry["canvas"], carry["cache"], j, fuse)
    else:
      logits = canvas_logits(carry["canvas"], j)

    active = ~carry["stopped"] & (j < num_blocks)
    eligible = blk_completion & (blk_steps < 0) & active[:, None]
    logp = _scaled_log_probs(logits, temperature)
    confidence = jnp.exp(jnp.max(logp, axis=-1))
    sampled = jax.lax.cond(
        greedy,
        lambda: jnp.argmax(logits, axis=-1).astype(jnp.int32),
        lambda: sample(logp, j, s),
    )
    sampled_logp = jnp.take_along_axis(logp, sampled[..., None], axis=-1)
    commit = _select_commits(params, confidence, eligible)
    new_tokens = jnp.where(commit, sampled, blk_tokens)
    new_steps = jnp.where(commit, s, blk_steps)
    new_logp = jnp.where(
        commit, sampled_logp[..., 0], block_slice(carry["logp_at"], j)
    )
    stepped = eligible.any(axis=-1)
    nonfinite = (eligible & ~jnp.isfinite(logits).all(axis=-1)).any(axis=-1)

    # Once no active row has a mask left in the block: stop the rows that
    # committed a stop token in it, then move on; the cached path writes the
    # finished block in the next block's first forward.
    left = (blk_completion & (new_steps < 0) & active[:, None]).any()
    block_done = ~left
    has_stop = (blk_completion & jnp.isin(new_tokens, stop_ids)).any(axis=-1)
    stopped = carry["stopped"] | (block_done & active & has_stop)
    continuing = ~stopped & (j + 1 < num_blocks)
    advance = block_done & continuing.any()
    out = dict(
        j=jnp.where(advance, j + 1, j),
        s=jnp.where(advance, 0, s + 1),
        fuse=use_cache & advance,
        done=block_done & ~continuing.any(),
        iteration=carry["iteration"] + 1,
        canvas=put_block(carry["canvas"], j, new_tokens),
        steps_at=put_block(carry["steps_at"], j, new_steps),
        logp_at=put_block(carry["logp_at"], j, new_logp),
        stopped=stopped,
        # A row needs this forward if it steps; a fused write is only ever
        # for a row that steps in the same forward.
        forwards=carry["forwards"] + stepped.astype(jnp.int32),
        num_steps=carry["num_steps"] + stepped.astype(jnp.int32),
        nonfinite=carry["nonfinite"] | nonfinite,
    )
    if use_cache:
      out["cache"] = cache
    return out

  carry = dict(
      j=jnp.int32(0),
      s=jnp.int32(0),
      # The first forward also prefills the prompt's complete blocks.
      fuse=jnp.bool_(use_cache and layout.first > 0),
      done=jnp.bool_(False),
      iteration=jnp.int32(0),
      canvas=tokens,
      steps_at=jnp.full((batch, length), -1, jnp.int32),
      logp_at=jnp.zeros((batch, length), jnp.float32),
      stopped=jnp.zeros((batch,), bool),
      forwards=jnp.zeros((batch,), jnp.int32),
      num_steps=jnp.zeros((batch,), jnp.int32),
      nonfinite=jnp.zeros((batch,), bool),
  )
  if use_cache:
    carry["cache"] = block_cache.init_block_cache(model, batch, length)

  # Forced progress: a block takes at most `size` steps; the bound only
  # guards against a bug (left masks fail after the loop).
  max_iterations = layout.blocks * size
  carry = jax.lax.while_loop(
      lambda c: ~c["done"] & (c["iteration"] < max_iterations), body, carry
  )
  names = ("canvas", "steps_at", "logp_at", "forwards", "num_steps")
  return {name: carry[name] for name in names + ("nonfinite",)}
