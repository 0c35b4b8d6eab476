# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: tiny real Tunix Qwen3 models, wrappers, SFT data and
held-out task prompts to decode.

Only add to this module; other test modules import it.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix.models.llama3 import model as llama3_lib
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd import fingerprint
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.sft import batching
from tunix_bd.sft import corruption


def tiny_qwen3_config(
    vocab_size: int = 128,
    embed_dim: int = 32,
    num_layers: int = 2,
    tied: bool = False,
) -> qwen3_lib.ModelConfig:
  """A tiny Qwen3 config (dense attention, so block masks are honoured)."""
  return qwen3_lib.ModelConfig(
      num_layers=num_layers,
      vocab_size=vocab_size,
      embed_dim=embed_dim,
      hidden_dim=2 * embed_dim,
      num_heads=2,
      head_dim=16,
      num_kv_heads=1,
      rope_theta=1_000_000,
      norm_eps=1e-6,
      use_tied_embedding=tied,
      use_flash_attention=False,
  )


def tiny_qwen3(
    vocab_size: int = 128,
    embed_dim: int = 32,
    num_layers: int = 2,
    seed: int = 0,
    tied: bool = False,
) -> qwen3_lib.Qwen3:
  """A random tiny Qwen3; NumPy draws the weights (eager init is slow).

  Args:
    vocab_size: vocabulary size.
    embed_dim: model width.
    num_layers: decoder layers.
    seed: NumPy seed of the weights.
    tied: tie the embedding and the output head.

  Returns:
    The model, float32, with weights of scale ~0.3 (so logits are peaked
    enough for confidence-based decoding to be non-trivial).
  """
  config = tiny_qwen3_config(vocab_size, embed_dim, num_layers, tied)
  return init_qwen3(config, seed)


def tiny_family_model(family: str, vocab_size: int = 128, seed: int = 0):
  """A random tiny Qwen3, Qwen2 or Llama 3 (dense attention, 2 layers)."""
  qwen3 = tiny_qwen3_config(vocab_size)
  # The sizes every family shares, those of the tiny Qwen3.
  sizes = {
      name: getattr(qwen3, name)
      for name in (
          "num_layers",
          "vocab_size",
          "embed_dim",
          "hidden_dim",
          "num_heads",
          "head_dim",
          "num_kv_heads",
          "rope_theta",
          "norm_eps",
      )
  }
  if family == "qwen3":
    return tiny_qwen3(vocab_size, seed=seed)
  if family == "qwen2":
    config = qwen2_lib.ModelConfig(**sizes, use_flash_attention=False)
    return init_tunix_model(qwen2_lib.Qwen2, config, seed)
  if family == "llama3":
    return init_tunix_model(
        llama3_lib.Llama3, llama3_lib.ModelConfig(**sizes), seed
    )
  raise ValueError(f"unknown family {family!r}.")


@jax.jit
def _forward(graphdef, state, tokens, positions, cache, mask):
  return nnx.merge(graphdef, state)(tokens, positions, cache, mask)


class JittedModel:
  """A Tunix model behind one compiled forward per input shape.

  Called exactly as a Tunix model (`model(tokens, positions, cache, mask)`),
  so eager code under test runs around a real forward that compiles once per
  shape. Not an `nnx.Module`: differentiate through `model` itself.

  Attributes:
    model: the wrapped Tunix model.
    config: its config.
  """

  def __init__(self, model):
    self.model = model
    self.config = model.config
    self._split = nnx.split(model)

  def __call__(self, tokens, positions, cache, mask):
    return _forward(*self._split, tokens, positions, cache, mask)

  def init_cache(self, batch_size, cache_size, dtype):
    return self.model.init_cache(batch_size, cache_size, dtype)


def init_tunix_model(model_cls, config, seed: int = 0, scale: float = 0.3):
  """A Tunix model of any class and config, its weights drawn by NumPy.

  Args:
    model_cls: e.g. `qwen3_lib.Qwen3`, built as `model_cls(config, rngs=)`.
    config: the model config.
    seed: NumPy seed of the weights.
    scale: standard deviation of the matrices (norm scales stay near 1); a
      small scale (e.g. 0.05) trains stably.

  Returns:
    The model, its weights float32 JAX arrays (trainable by Tunix).
  """
  abstract = nnx.eval_shape(lambda: model_cls(config, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(abstract)
  rng = np.random.default_rng(seed)

  def draw(leaf):
    if leaf.ndim == 1:  # Norm scales.
      value = 1.0 + 0.1 * rng.standard_normal(leaf.shape)
    else:
      value = scale * rng.standard_normal(leaf.shape)
    # JAX arrays, so the model also works when closed over by a transform.
    return jnp.asarray(value, leaf.dtype)

  return nnx.merge(graphdef, jax.tree.map(draw, state.to_pure_dict()))


def init_qwen3(
    config: qwen3_lib.ModelConfig, seed: int = 0, scale: float = 0.3
) -> qwen3_lib.Qwen3:
  """A Qwen3 of any config (`init_tunix_model`)."""
  return init_tunix_model(qwen3_lib.Qwen3, config, seed, scale)


def digit_task_sft_batches(
    tokenizer,
    config: bd_config_lib.BlockDiffusionConfig,
    *,
    mix_seed: int,
    gradient_accumulation_steps: int,
):
  """SFT batches of 8 embedded digit-task examples, 48 tokens wide.

  Global batches of 8 examples (16 rows with complementary masking), each
  split into `gradient_accumulation_steps` micro-batches.
  """
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=mix_seed
  )
  conversations = dataset_lib.embedded_conversations(mix, "train", 8)
  return batching.sft_batches(
      dataset_lib.tokenize(tokenizer, conversations, 48),
      batch_size=8,
      corruption=corruption.SftCorruptionConfig(
          min_noise=0.1,
          max_noise=0.9,
          complementary=True,
          loss_weighting=corruption.INVERSE_T,
      ),
      config=config,
      eos_id=tokenizer.eos_token_id,
      seed=0,
      gradient_accumulation_steps=gradient_accumulation_steps,
  )


def sampled_trace(
    model,
    bd: bd_config_lib.BlockDiffusionConfig,
    *,
    stop_id: int,
    pad_id: int,
    batch: int = 4,
    new_tokens: int = 8,
):
  """The `Trace` of a real sampled rollout of `model` (at most 4 rows).

  Prompts of lengths 3, 5, 4, 6 (the first `batch`), ids above the mask,
  stop and pad ids; temperature 1 and threshold 0.3, so rows commit several
  tokens in some steps and may stop early.
  """
  rng = np.random.default_rng(1)
  lengths = np.asarray([3, 5, 4, 6][:batch], np.int32)
  low = max(bd.mask_token_id, stop_id, pad_id) + 1
  prompts = rng.integers(low, model.config.vocab_size, (batch, 6))
  config = denoise.DenoiseConfig(
      max_new_tokens=new_tokens,
      max_prompt_length=6,
      threshold=0.3,
      temperature=1.0,
      stop_ids=(stop_id,),
      pad_id=pad_id,
  )
  out = denoise.Denoiser(model, bd=bd, config=config)(
      prompts.astype(np.int32), lengths, seeds=np.arange(batch)
  )
  return out.trace


class CharTaskDecoding(NamedTuple):
  """What decoding held-out task prompts with a tiny model needs."""

  tokenizer: Any
  bd: bd_config_lib.BlockDiffusionConfig
  config: denoise.DenoiseConfig
  prompts: prompts_lib.PromptSet


def char_task_decoding(**config_kwargs) -> CharTaskDecoding:
  """The char tokenizer, blocks of 4 (mask id 3) and 5 eval task prompts.

  Args:
    **config_kwargs: `DenoiseConfig` fields (e.g. `max_new_tokens`,
      `temperature`); prompts are at most 32 tokens, stop at EOS and pad
      with the tokenizer's pad.
  """
  tokenizer = tokenizer_lib.build_char_tokenizer()
  config = denoise.DenoiseConfig(
      max_prompt_length=32,
      stop_ids=(tokenizer.eos_token_id,),
      pad_id=tokenizer.pad_token_id,
      **config_kwargs,
  )
  prompts = prompts_lib.encode_prompts(
      tokenizer,
      dataset_lib.embedded_conversations(
          tasks_lib.TaskMix(max_len=3), "eval", 5
      ),
      32,
  )
  return CharTaskDecoding(
      tokenizer,
      bd_config_lib.BlockDiffusionConfig(block_size=4, mask_token_id=3),
      config,
      prompts,
  )


SDAR_TINY = os.path.join(
    os.path.dirname(__file__), "testdata", "bd_formats", "sdar_tiny"
)


def sdar_tiny_with_positions(directory: str, positions: int) -> str:
  """The SDAR fixture (same-position, block 4) in `directory`, its files
  linked, declaring `max_position_embeddings=positions`; returns it."""
  for name in os.listdir(SDAR_TINY):
    if name != "config.json":
      os.symlink(os.path.join(SDAR_TINY, name), os.path.join(directory, name))
  with open(os.path.join(SDAR_TINY, "config.json")) as f:
    hf_config = json.load(f)
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(dict(hf_config, max_position_embeddings=positions), f)
  return directory


def device_ids(tree: Any) -> list[int]:
  """The sorted ids of every device holding a shard of `tree`'s arrays."""
  return sorted({
      device.id
      for leaf in jax.tree.leaves(tree)
      if isinstance(leaf, jax.Array)
      for device in leaf.sharding.device_set
  })


def check_or_record(checkpoint_dir, current) -> None:
  """A launch's fingerprint check, then its record (nothing in between)."""
  fingerprint.check(checkpoint_dir, current)
  fingerprint.record(checkpoint_dir, current)
