# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Decoding speed at a realistic model size, with no training.

A randomly initialised Tunix Qwen3 decodes random prompts with a fixed
commit schedule: the `top_k` rule commits exactly k positions per step, so
with block-aligned prompts and a block-multiple budget every row makes
exactly k tokens per forward, whatever the weights. No id stops a row, so
every row decodes the whole budget. Its speed against Tunix's `Sampler` and
against our one-token-block AR loop on the same model is what a user with a
real model of that size would see at that tokens-per-forward.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from benchmarks import batch_sweep
from benchmarks import roofline
import jax.numpy as jnp
import numpy as np
from tunix_bd import config_utils
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.evaluation import ar_sampler
from tunix_bd.evaluation import speed
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.models import from_scratch
from tunix_bd.models import precision

AR_SAMPLER = "ar"
AR_LOOP = "ar_loop"


def method(k: int) -> str:
  return f"bd_top{k}"


# The `kind` of a `workload_settings` entry that is a `FixedSchedule`.
RANDOM = "random"


def _realistic_model() -> from_scratch.ScratchModelSettings:
  """Qwen3-0.6B's width and head layout, 12 of its 28 layers (0.26 B)."""
  return from_scratch.ScratchModelSettings(
      num_layers=12,
      embed_dim=1024,
      hidden_dim=3072,
      num_heads=16,
      head_dim=128,
      num_kv_heads=8,
  )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedSchedule:
  """A random-model workload, a `workload_settings` entry (`kind="random"`).

  The defaults are `bench_decode.py:realistic`'s.

  Attributes:
    kind: `random`, what makes the entry this workload.
    model: the `from_scratch.ScratchModelSettings` of the Qwen3.
    vocab_size: the model's vocabulary (the prompts use the embedded
      tokenizer's characters, a subset).
    block_size: the denoiser's block size.
    top_k: the commit schedules, each k dividing `block_size`.
    prompt_length: tokens per prompt, a multiple of `block_size` (so TPF
      is exactly k).
    max_new_tokens: tokens decoded per row, a multiple of `block_size`.
    seed: of the weights and the prompts.
    dtype: the compute dtype, `float32` or `bfloat16`; the model only
      decodes, so its matrices are stored in it
      (`precision.matrices_to_compute_dtype`).
    scan_layers: our loop and block diffusion run the layers in one scan
      (`denoise.DenoiseConfig.scan_layers`); the `Sampler` loops.
  """

  kind: str = RANDOM
  model: from_scratch.ScratchModelSettings = dataclasses.field(
      default_factory=_realistic_model
  )
  vocab_size: int = 65_536
  block_size: int = 8
  top_k: tuple[int, ...] = (1, 2, 4, 8)
  prompt_length: int = 32
  max_new_tokens: int = 256
  seed: int = 0
  dtype: str = "float32"
  scan_layers: bool = False

  @classmethod
  def from_section(cls, section: Any, key: str) -> FixedSchedule:
    """Checks a config section; errors name `key.FIELD`.

    A key the section omits takes its default; one that is no field fails.
    """
    fields = config_utils.section_dict(section, key)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(fields) - set(known))
    if unknown:
      raise ValueError(
          f"unknown {key} config keys {unknown}; valid keys are {known}."
      )
    if fields.get("kind", RANDOM) != RANDOM:
      raise ValueError(
          f"{key}.kind must be {RANDOM!r}, got {fields['kind']!r}."
      )
    model = fields.get("model")
    if model is not None and not isinstance(
        model, from_scratch.ScratchModelSettings
    ):
      # Keys the model section omits are the realistic workload's too.
      fields["model"] = config_utils.from_section(
          from_scratch.ScratchModelSettings,
          {
              **dataclasses.asdict(_realistic_model()),
              **config_utils.section_dict(model, f"{key}.model"),
          },
          f"{key}.model",
      )
    workload = cls(**fields)
    size = config_utils.check_int(f"{key}.block_size", workload.block_size, 1)
    for name in ("vocab_size", "prompt_length", "max_new_tokens"):
      config_utils.check_int(f"{key}.{name}", getattr(workload, name), 1)
    config_utils.check_int(f"{key}.seed", workload.seed, 0)
    config_utils.check_choice(f"{key}.dtype", workload.dtype, precision.DTYPES)
    config_utils.check_bool(f"{key}.scan_layers", workload.scan_layers)
    if workload.vocab_size < tokenizer_lib.VOCAB_SIZE:
      raise ValueError(
          f"{key}.vocab_size must be >= {tokenizer_lib.VOCAB_SIZE} (the"
          f" prompts' tokenizer), got {workload.vocab_size}."
      )
    for name in ("prompt_length", "max_new_tokens"):
      if getattr(workload, name) % size:
        raise ValueError(
            f"{key}.{name}={getattr(workload, name)} must be a multiple of"
            f" block_size={size}, so every row makes exactly k tokens per"
            " forward."
        )
    ks = tuple(workload.top_k)
    if not ks or any(not isinstance(k, int) or k < 1 or size % k for k in ks):
      raise ValueError(
          f"{key}.top_k must be ints dividing block_size={size}, got {ks}."
      )
    return dataclasses.replace(workload, top_k=ks)

  def block_sizes(self) -> dict[str, int]:
    """Each method's block size (1 for AR)."""
    blocks = {AR_SAMPLER: 1, AR_LOOP: 1}
    blocks.update({method(k): self.block_size for k in self.top_k})
    return blocks


def build(
    workload: FixedSchedule, rows: int, mesh: Any
) -> tuple[Any, Any, dict[str, speed.Decoder], dict[str, list], dict]:
  """The random model, its tokenizer, every method's decoder and inputs.

  Args:
    workload: the settings.
    rows: prompts to draw.
    mesh: the device mesh of the weights.

  Returns:
    `(model, tokenizer, decoders, inputs, engines)`; inputs per method, in
    the form its decoder takes (text for the `Sampler`, token ids for ours);
    engines per method of our loop, its model-free twins
    (`roofline.engine_decoders`).
  """
  tokenizer = tokenizer_lib.build_char_tokenizer()
  config = from_scratch.qwen3_config(workload.model, workload.vocab_size)
  config = dataclasses.replace(config, dtype=jnp.dtype(workload.dtype))
  model = from_scratch.init_model(config, workload.seed, mesh)
  precision.matrices_to_compute_dtype(model, workload.dtype)
  mask_id = tokenizer.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
  # Printable characters only: the Sampler re-encodes the text exactly.
  characters = [
      i
      for i in range(tokenizer_lib.VOCAB_SIZE)
      if len(tokenizer.decode([i])) == 1 and tokenizer.decode([i]).isprintable()
  ]
  rng = np.random.default_rng(workload.seed)
  prompt_ids = [
      rng.choice(characters, workload.prompt_length).tolist()
      for _ in range(rows)
  ]
  texts = [tokenizer.decode(p) for p in prompt_ids]
  if [tokenizer.encode(t, add_special_tokens=False) for t in texts] != (
      prompt_ids
  ):
    raise ValueError("random prompts did not round-trip the tokenizer.")

  engines = {}

  def denoiser(name, bd, **rule):
    config = denoise.DenoiseConfig(
        max_new_tokens=workload.max_new_tokens,
        max_prompt_length=workload.prompt_length,
        stop_ids=(),  # Nothing ends a row early: all rows decode it all.
        pad_id=tokenizer.pad_token_id,
        scan_layers=workload.scan_layers,
        **rule,
    )
    engines[name] = roofline.engine_decoders(
        model, tokenizer, bd=bd, config=config
    )
    return speed.denoiser_decoder(model, tokenizer, bd=bd, config=config)

  bd = bd_config_lib.BlockDiffusionConfig(
      block_size=workload.block_size, mask_token_id=mask_id
  )
  decoders = {
      AR_SAMPLER: ar_sampler.greedy_decoder(
          model,
          tokenizer,
          max_prompt_length=workload.prompt_length,
          max_new_tokens=workload.max_new_tokens,
          # An id the model cannot emit: the Sampler decodes the budget.
          eos_tokens=(workload.vocab_size,),
      ),
      AR_LOOP: denoiser(
          AR_LOOP,
          bd_config_lib.BlockDiffusionConfig.autoregressive(mask_id),
          rule=commit_rules.THRESHOLD,
          threshold=1.0,
      ),
  }
  for k in workload.top_k:
    decoders[method(k)] = denoiser(
        method(k), bd, rule=commit_rules.TOP_K, top_k=k
    )
  inputs = {m: prompt_ids for m in decoders}
  inputs[AR_SAMPLER] = texts
  return model, tokenizer, decoders, inputs, engines


def check_schedule(
    timings: dict[str, speed.Timing], workload: FixedSchedule
) -> None:
  """Fails if a row stopped early or made other than k tokens per forward.

  Raises:
    ValueError: naming the method, if the schedule did not hold.
  """
  for name, timing in timings.items():
    if (timing.num_tokens != workload.max_new_tokens).any():
      raise ValueError(
          f"{name}: rows returned {sorted(set(timing.num_tokens.tolist()))}"
          f" tokens, not the whole budget {workload.max_new_tokens}."
      )
  for k in workload.top_k:
    forwards = timings[method(k)].num_forwards
    if (forwards * k != workload.max_new_tokens).any():
      raise ValueError(
          f"{method(k)}: {sorted(set(forwards.tolist()))} forwards for"
          f" {workload.max_new_tokens} tokens, not exactly {k} per forward."
      )


def measure(
    workload: FixedSchedule,
    *,
    batch_sizes: Sequence[int],
    repeats: int,
    mesh: Any,
) -> dict[str, Any]:
  """The random model decoded at k tokens per forward, for every k.

  Args:
    workload: the settings.
    batch_sizes: rows per call, one measurement each (`batch_sweep`).
    repeats: passes over all batches; each batch counts its fastest.
    mesh: the device mesh of the weights.

  Returns:
    The workload's report entry (`decode_table.format_table`).

  Raises:
    ValueError: if a row did not decode exactly k tokens per forward.
  """
  rows = max(batch_sizes)
  model, _, decoders, inputs, engines = build(workload, rows, mesh)
  blocks = workload.block_sizes()
  size, budget = workload.block_size, workload.max_new_tokens
  result = {"block_size": size, "max_new_tokens": budget}
  result.update(
      batch_sweep.measure(
          decoders,
          inputs,
          batch_sizes=batch_sizes,
          repeats=repeats,
          blocks=blocks,
          models={1: model, size: model},
          cached={m: True for m in blocks},
          engines=engines,
          budget=budget,
          # No stop token: each row's answer is the whole budget.
          lengths=(prompt_lengths(inputs), [budget] * rows, [False] * rows),
          # One batch per size: every row decodes the whole budget alike.
          one_batch=True,
          check=lambda timings: check_schedule(timings, workload),
      )
  )
  return result


def prompt_lengths(inputs: dict[str, Sequence]) -> list[int]:
  return [len(p) for p in inputs[AR_LOOP]]
