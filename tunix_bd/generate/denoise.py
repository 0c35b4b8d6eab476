# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Parallel block denoising: generation with a block-diffusion LM.

Blocks are decoded in order, each by denoising steps, in one jitted loop
(`decode_loop`; docs/design.md "Denoising step", "KV cache"); rows stop
after the block holding their first stop token (`core.eos`). A `Denoiser`
holds what calls share (checked settings, the split model).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from flax import nnx
import jax
import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import cached_logits
from tunix_bd.core import diffusion_lm
from tunix_bd.core import eos
from tunix_bd.core import external_logits
from tunix_bd.core import families
from tunix_bd.core import trace as trace_lib
from tunix_bd.generate import canvas as canvas_lib
from tunix_bd.generate import commit_rules
from tunix_bd.generate import decode_loop
from tunix_bd.generate import step as step_lib

# Sampling knobs of AR samplers that block denoising does not implement.
_UNSUPPORTED_FILTERS = (
    "top_p",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sampling(commit_rules.CommitSettings):
  """What a `DenoiseConfig` shares with the config sections that build one
  (`generate.settings.Decoding`), each checked.

  Attributes:
    max_new_tokens: T, completion positions per row.
    temperature: sampling temperature; 0 is greedy (argmax).
    use_cache: decode with the block KV cache (else one forward over the
      whole canvas per step; the same tokens, for testing and reference).
    scan_layers: cached decoding runs the layers in one scan over a
      stacked KV cache (docs/design.md "Layers compiled once"); equal tokens
      up to float rounding. Cache-free, or where they cannot scan, the loop.
  """

  max_new_tokens: int = 16
  temperature: float = 0.0
  use_cache: bool = True
  scan_layers: bool = False

  def __post_init__(self):
    super().__post_init__()
    self.check_int("max_new_tokens")
    value = self.temperature
    ok = commit_rules.is_number(value) and value >= 0
    self.check("temperature", ok, "a finite number >= 0")
    for name in ("use_cache", "scan_layers"):
      self.check(name, isinstance(getattr(self, name), bool), "a bool")
    # Normalise NumPy scalars so that equal settings are equal.
    object.__setattr__(self, "temperature", float(self.temperature))

  def check_int(self, name: str, minimum: int = 1) -> None:
    """Checks that field `name` is an int >= `minimum`, and makes it one."""
    value = getattr(self, name)
    self.check(name, commit_rules.is_int(value), "an int")
    self.check(name, value >= minimum, f">= {minimum}")
    object.__setattr__(self, name, int(value))


@dataclasses.dataclass(frozen=True, kw_only=True)
class DenoiseConfig(Sampling):
  """How to denoise. Frozen and hashable.

  Only `max_new_tokens`, `max_prompt_length`, `use_cache`, `scan_layers`
  and the number of stop ids shape the compiled program; the rest are
  runtime values.

  Attributes:
    max_prompt_length: the longest prompt accepted; fixes the layout.
    stop_ids: ids that end a row (EOS included), per `tunix_bd.core.eos`.
    pad_id: the id of never-generated completion positions in the output.
  """

  max_prompt_length: int
  stop_ids: tuple[int, ...] = ()
  pad_id: int = 0

  def __new__(cls, *args, **kwargs):
    # Unknown keywords (an AR sampler's `top_p`, say) fail as a ValueError
    # naming them, not as a TypeError about the signature.
    del args
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
      filters = [k for k in unknown if k in _UNSUPPORTED_FILTERS]
      what = (
          f"sampling filters {filters} are not supported by block denoising"
          if filters
          else f"unknown denoise settings {unknown}"
      )
      raise ValueError(f"{what}; valid settings are {sorted(known)}.")
    return super().__new__(cls)

  def __post_init__(self):
    super().__post_init__()
    self.check_int("max_prompt_length")
    value = self.pad_id
    self.check(
        "pad_id", commit_rules.is_int(value) and value >= 0, "an int >= 0"
    )
    stop_ids = self.stop_ids
    self.check(
        "stop_ids",
        isinstance(stop_ids, Sequence)
        and not isinstance(stop_ids, str)
        and all(commit_rules.is_int(s) and s >= 0 for s in stop_ids),
        "a sequence of ints >= 0",
    )
    object.__setattr__(self, "pad_id", int(self.pad_id))
    object.__setattr__(self, "stop_ids", tuple(int(s) for s in stop_ids))

  @property
  def greedy(self) -> bool:
    return self.temperature == 0.0


@dataclasses.dataclass(frozen=True)
class DenoiseOutput:
  """What a `Denoiser` returns; arrays are NumPy, rows in input order.

  Attributes:
    completion_tokens: int32 `[batch, max_new_tokens]` in logical order; the
      pad id where never generated (after the stop block).
    completions: each row's tokens before its first stop token.
    num_forwards: int32 `[batch]` model forwards the row needed, one per
      denoising step (cache writes ride on the next block's first step).
    tokens_per_forward: float32 `[batch]` `len(completions[r]) /
      num_forwards[r]`.
    trace: the rollout's `Trace` (tokens, commit steps, log-probs).
  """

  completion_tokens: np.ndarray
  completions: list[np.ndarray]
  num_forwards: np.ndarray
  tokens_per_forward: np.ndarray
  trace: trace_lib.Trace


class Denoiser:
  """Parallel block denoising of one model with fixed settings, reusable.

  Checks the model and settings once and splits the model once, as Tunix's
  `Sampler` does, so repeated calls (serving, RL rollouts) pay for neither.
  The split state holds the model's own `nnx.Variable`s, so in-place weight
  updates (optimizer steps, `nnx.update`) are seen by the next call; build a
  new `Denoiser` after changing the model's structure (adding LoRA, say).
  """

  def __init__(
      self,
      model: nnx.Module,
      *,
      bd: bd_config_lib.BlockDiffusionConfig,
      config: DenoiseConfig,
      logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_logits_fn,
      cached_logits_fn: diffusion_lm.CachedRowsFn = (
          cached_logits.block_logits_with_cache
      ),
  ):
    """Checks and captures what every call shares.

    Args:
      model: a Tunix decoder `nnx.Module` (e.g. Qwen3) with dense attention.
      logits_fn: the cache-free model call (`use_cache=False`).
      cached_logits_fn: the cached model call (`use_cache=True`); an
        `external_logits.CacheFree` one decodes cache-free with its own
        `logits_fn` whatever `use_cache` says.
    """
    if not isinstance(config, DenoiseConfig):
      raise ValueError(
          f"config must be a DenoiseConfig, got {type(config).__name__}."
      )
    if not isinstance(bd, bd_config_lib.BlockDiffusionConfig):
      raise ValueError(
          f"bd must be a BlockDiffusionConfig, got {type(bd).__name__}."
      )
    if not isinstance(model, nnx.Module) or not hasattr(model, "config"):
      raise ValueError("model must be a Tunix nnx.Module with a config.")
    families.family(model.config)
    bd.validate_for_model(
        model.config,
        pad_id=config.pad_id,
        eos_id=None,
        stop_ids=config.stop_ids,
    )
    self.bd, self.config = bd, config
    self._vocab_size = model.config.vocab_size
    self._graphdef, self._state = nnx.split(model)
    self._layout = canvas_lib.Layout.create(
        bd.block_size, config.max_prompt_length, config.max_new_tokens
    )
    # Sent to the device once: each transfer adds a fixed latency to a call.
    self._params = jax.device_put(
        step_lib.CommitParams.create(config, config.temperature)
    )
    cache_free = isinstance(cached_logits_fn, external_logits.CacheFree)
    self._use_cache = config.use_cache and not cache_free
    if (
        config.scan_layers
        and self._use_cache
        and cached_logits_fn
        not in (
            cached_logits.block_rows_with_cache,
            cached_logits.block_logits_with_cache,
        )
    ):
      # An injected call gets the cache's `kv` for a model it calls itself.
      raise ValueError(
          "scan_layers=True keeps the KV cache stacked, which only the"
          " default cached model call reads; set scan_layers=False with an"
          " injected cached_logits_fn."
      )
    self._logits_fns = dict(
        logits_fn=cached_logits_fn.logits_fn if cache_free else logits_fn,
        cached_logits_fn=cached_logits_fn,
    )
    self._stop_ids = jax.device_put(np.asarray(config.stop_ids, np.int32))

  def __call__(
      self,
      prompt_tokens: Sequence[Sequence[int]] | np.ndarray | jax.Array,
      prompt_lengths: np.ndarray | Sequence[int] | None = None,
      *,
      seeds: np.ndarray | Sequence[int] | None = None,
  ) -> DenoiseOutput:
    """Generates completions of a batch.

    Args:
      prompt_tokens: a list of per-row token lists, or an int `[batch,
        width]` right-padded array together with `prompt_lengths`.
      prompt_lengths: int `[batch]` real lengths of a padded array; None for
        a list of lists.
      seeds: `[batch]` ints in [0, 2**32), one RNG stream per row; required
        when `config.temperature > 0`, ignored when greedy.

    Bad settings and inputs raise ValueError before any compute; non-finite
    logits or positions left masked raise after decoding, naming the rows.
    """
    config, bd = self.config, self.bd
    prompts, lengths = _prompts(
        prompt_tokens, prompt_lengths, config, bd, self._vocab_size
    )
    seeds = _seeds(seeds, len(lengths), config)
    canvas = canvas_lib.build_canvas(
        prompts, lengths, self._layout, bd.mask_token_id
    )
    packed = decode_loop.decode(
        self._graphdef,
        self._state,
        canvas_lib.pack_inputs(canvas, seeds),
        self._params,
        self._stop_ids,
        bd=bd,
        layout=self._layout,
        use_cache=self._use_cache,
        scan_layers=config.scan_layers and self._use_cache,
        **self._logits_fns,
    )
    out = canvas_lib.unpack_outputs(packed, self._layout.length)
    # Completion slot t of row r sits at physical offset_r + P_r + t.
    total = config.max_new_tokens
    index = (canvas["offsets"] + lengths)[:, None] + np.arange(total)[None, :]
    take = lambda x: np.take_along_axis(np.asarray(x), index, axis=1)
    steps = take(out["steps_at"]).astype(np.int32)
    generated = steps >= 0
    tokens = np.where(generated, take(out["canvas"]), config.pad_id)
    logp = np.where(generated, take(out["logp_at"]), 0.0).astype(np.float32)
    trace = trace_lib.Trace(
        prompt_tokens=prompts,
        prompt_lengths=lengths,
        tokens=tokens.astype(np.int32),
        action_step=steps,
        action_logp=logp,
        temperature=1.0 if config.greedy else config.temperature,
        bd=bd,
    )
    if out["nonfinite"].any():
      raise ValueError(
          "non-finite logits while denoising rows"
          f" {np.flatnonzero(out['nonfinite']).tolist()}."
      )
    # Rows must have generated whole blocks up to their stop block (or all).
    trace.validate(stop_ids=config.stop_ids)

    completions = eos.truncate_at_stop(tokens, config.stop_ids)
    # Every forward is a denoising step of each row it serves: cache writes
    # ride on the next block's first step.
    forwards = np.asarray(out["num_steps"], np.int32)
    returned = np.asarray([len(c) for c in completions], np.float32)
    return DenoiseOutput(
        completion_tokens=tokens.astype(np.int32),
        completions=completions,
        num_forwards=forwards,
        tokens_per_forward=returned / np.maximum(forwards, 1),
        trace=trace,
    )


def _prompts(prompt_tokens, prompt_lengths, config, bd, vocab_size):
  """Validates the prompts of a batch, before any compute; errors name rows.

  Returns:
    int32 `[batch, config.max_prompt_length]` prompts right-padded with
    `config.pad_id`, and their int32 `[batch]` lengths.
  """
  if prompt_lengths is None:
    if isinstance(prompt_tokens, (np.ndarray, jax.Array)):
      raise ValueError("prompt_lengths is required with a padded array.")
    rows = [np.asarray(row).reshape(-1) for row in prompt_tokens]
    lengths = np.asarray([len(row) for row in rows], np.int64)
  else:
    padded = np.asarray(prompt_tokens)
    lengths = np.asarray(prompt_lengths)
    if padded.ndim != 2 or lengths.shape != padded.shape[:1]:
      raise ValueError(
          "prompt_tokens must be [batch, length] with prompt_lengths [batch],"
          f" got {padded.shape} and {lengths.shape}."
      )
    if not np.issubdtype(lengths.dtype, np.integer):
      raise ValueError(f"prompt_lengths must be integer, got {lengths.dtype}.")
    if (lengths > padded.shape[1]).any():
      raise ValueError(
          f"prompt_lengths {lengths.tolist()} exceed the array width"
          f" {padded.shape[1]}."
      )
    rows = [row[:n] for row, n in zip(padded, np.maximum(lengths, 0))]
  if not rows:
    raise ValueError("the batch is empty; pass at least one prompt.")
  if (lengths < 1).any():
    raise ValueError(
        f"prompts of rows {np.flatnonzero(lengths < 1).tolist()} are empty;"
        " every row needs a prompt of at least one token."
    )
  too_long = lengths > config.max_prompt_length
  if too_long.any():
    raise ValueError(
        f"prompts of rows {np.flatnonzero(too_long).tolist()} have"
        f" {lengths[too_long].tolist()} tokens, more than"
        f" max_prompt_length={config.max_prompt_length}."
    )
  out = np.full((len(rows), config.max_prompt_length), config.pad_id, np.int32)
  for r, row in enumerate(rows):
    if not np.issubdtype(row.dtype, np.integer):
      raise ValueError(
          f"prompt row {r} must hold integer ids, got {row.dtype}."
      )
    if ((row < 0) | (row >= vocab_size)).any():
      raise ValueError(
          f"prompt row {r} has ids outside the vocabulary [0, {vocab_size})."
      )
    if (row == bd.mask_token_id).any():
      raise ValueError(
          f"prompt row {r} contains the mask token {bd.mask_token_id}."
      )
    out[r, : len(row)] = row
  return out, lengths.astype(np.int32)


def _seeds(values, batch: int, config) -> np.ndarray:
  """Validated uint32 `[batch]` per-row seeds (zeros when greedy and None)."""
  if values is None:
    if not config.greedy:
      # A default such as the row index would tie a row's samples to its
      # place in the batch.
      raise ValueError(
          f"temperature={config.temperature} samples: pass one seed per row."
      )
    return np.zeros((batch,), np.uint32)
  values = np.asarray(values)
  if values.shape != (batch,) or not np.issubdtype(values.dtype, np.integer):
    raise ValueError(
        f"seeds must be {batch} ints (one per row), got {values.shape}"
        f" {values.dtype}."
    )
  if ((values < 0) | (values >= 2**32)).any():
    raise ValueError("seeds must be in [0, 2**32).")
  return values.astype(np.uint32)
