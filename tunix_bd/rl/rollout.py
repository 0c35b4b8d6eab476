# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionRollout`: Tunix's rollout engine for a block-diffusion policy.

A `functools.partial(DiffusionRollout, bd=..., decode=...)` is Tunix's
`ClusterConfig.rollout_engine`. Each `generate` call decodes by parallel
block denoising (`generate.denoise.Denoiser`); the `Trace` goes to the
collector that `DiffusionRLCluster.generate` opens, as Tunix's
`RLCluster.generate` drops extra output fields (docs/design.md "Why the
rollout rules").
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Iterator

from absl import logging
from flax import nnx
import jax
import numpy as np

from tunix_bd import compat
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import cached_logits
from tunix_bd.core import diffusion_lm
from tunix_bd.core import lm_head
from tunix_bd.core import replay as replay_lib
from tunix_bd.core import special_ids
from tunix_bd.core import trace as trace_lib
from tunix_bd.generate import denoise
from tunix_bd.rl import role_shim

# Row-seed streams: the mode is part of the seed, so evaluation never draws
# from (or advances) the training stream.
MODE_IDS = {"train": 0, "eval": 1}


def row_seeds(
    seed: int, mode: str, global_step: int, call_index: int, rows: int
) -> np.ndarray:
  """uint32 `[rows]` sampling seeds of one `generate` call."""
  entropy = [int(seed), MODE_IDS[mode], int(global_step), int(call_index)]
  return np.random.SeedSequence(entropy).generate_state(rows)


def check_rollout_config(
    config: compat.RolloutConfig, *, training: bool, model_dtype: Any
) -> None:
  """Fails closed on what a denoising rollout cannot honor."""
  if config.top_k is not None:
    raise ValueError(
        f"rollout_config.top_k={config.top_k} is a vocabulary filter, which"
        " block denoising does not support (its k is the commit rule's"
        " rollout.top_k); leave it None."
    )
  if config.top_p not in (None, 1.0):
    raise ValueError(
        f"rollout_config.top_p={config.top_p} is a vocabulary filter, which"
        " block denoising does not support; use None or 1.0."
    )
  if training and not config.temperature > 0:
    raise ValueError(
        "rollout_config.temperature must be > 0 for training rollouts (GRPO"
        f" needs samples), got {config.temperature}."
    )
  if config.data_type is not None and np.dtype(config.data_type) != np.dtype(
      model_dtype
  ):
    raise ValueError(
        f"rollout_config.data_type={config.data_type} differs from the"
        f" model's {np.dtype(model_dtype)}; the rollout must run in the"
        " trained dtype for exact replay."
    )


class _ThreadState(threading.local):
  """This thread's generation context and open trace collectors."""

  def __init__(self):
    super().__init__()
    self.context: tuple[int, str] | None = None
    self.collectors: list[list[Any]] = []


class DiffusionRollout(compat.BaseRollout):
  """A Tunix rollout engine that decodes by parallel block denoising."""

  def __init__(
      self,
      *,
      rollout_actor: nnx.Module,
      tokenizer: Any,
      mesh: jax.sharding.Mesh,
      rollout_config: compat.RolloutConfig,
      bd: bd_config_lib.BlockDiffusionConfig,
      decode: denoise.DenoiseConfig,
      seed: int = 0,
      logits_fn: diffusion_lm.RowsFn = diffusion_lm.diffusion_rows,
      cached_logits_fn: diffusion_lm.CachedRowsFn = (
          cached_logits.block_rows_with_cache
      ),
      logits_chunk: int | None = None,
  ):
    """Checks the settings and places the rollout's own copy of the model.

    The rollout decodes with `rollout_actor` where it already sits on `mesh`
    as `role_shim.place_on_mesh` would put it (`shares_actor`), else with its
    own copy on `mesh`. `decode` is the run's one `DenoiseConfig` (its stop
    ids end a row, its pad fills the rest), each mode's lengths and
    temperature set from its `rollout_config`. `cached_logits_fn` also
    replays the trace for the old, reference and live policies, in
    vocabulary chunks of `logits_chunk` (None: dense).
    """
    if not isinstance(decode, denoise.DenoiseConfig):
      raise ValueError(
          f"decode must be a DenoiseConfig, got {type(decode).__name__}."
      )
    stop_ids = special_ids.check_distinct("stop_ids", decode.stop_ids)
    if not stop_ids:
      raise ValueError("stop_ids must name at least one stop id (e.g. EOS).")
    special_ids.check(
        mask_token_id=bd.mask_token_id, pad_id=decode.pad_id, stop_ids=stop_ids
    )
    self._dtype = jax.tree.leaves(nnx.state(rollout_actor, nnx.Param))[0].dtype
    check_rollout_config(rollout_config, training=True, model_dtype=self._dtype)
    self._tokenizer = tokenizer
    # Explicit stop ids are enough (as for Tunix's samplers): a tokenizer
    # without an EOS token ends completions at the first stop id.
    eos = tokenizer.eos_id()
    self._eos_id = stop_ids[0] if eos is None else int(eos)
    self.bd, self.decode, self.seed = bd, decode, int(seed)
    self.shares_actor = role_shim.is_placed(rollout_actor, mesh)
    self._model, self.mesh = rollout_actor, mesh
    if not self.shares_actor:
      self._model = role_shim.place_on_mesh(rollout_actor, mesh, copy=True)
    fns, rebound = role_shim.rebind_keywords(
        dict(logits_fn=logits_fn, cached_logits_fn=cached_logits_fn), mesh
    )
    if rebound:
      logging.info(
          "rollout: rebound %d meshes in its logits functions.", rebound
      )
    self.logits_fn, self.cached_logits_fn = fns.values()
    self.logits_chunk = lm_head.check_chunk(logits_chunk)
    # Denoisers are built lazily per (lengths, temperature), after the
    # placement above has rebound every mesh the model holds (they capture
    # the graph at construction).
    self._denoisers: dict[denoise.DenoiseConfig, denoise.Denoiser] = {}
    self._lock = threading.Lock()
    self._local = _ThreadState()
    self._calls: dict[tuple[int, str], int] = {}
    # Checks the model against `bd` and the settings now, not mid-run.
    self._denoiser(self.denoise_config(rollout_config))

  def set_generation_context(self, *, global_step: int, mode: Any) -> None:
    """Sets this thread's (global step, mode) for the next `generate` calls
    (Tunix PR 1749's hook): calls within one are numbered 0, 1, ... in
    order, and each number seeds its rows."""
    name = str(getattr(mode, "value", mode)).lower()  # A `Mode` or its value.
    if name not in MODE_IDS:
      raise ValueError(f"unknown rollout mode {mode!r}; want train or eval.")
    self._local.context = (int(global_step), name)

  @contextlib.contextmanager
  def collect_traces(self) -> Iterator[list[tuple[Any, np.ndarray]]]:
    """Collects `(trace, num_forwards)` of this thread's `generate` calls."""
    collected: list[tuple[Any, np.ndarray]] = []
    self._local.collectors.append(collected)
    try:
      yield collected
    finally:
      self._local.collectors.pop()

  def denoise_config(
      self, rollout_config: compat.RolloutConfig
  ) -> denoise.DenoiseConfig:
    """`decode` with one mode's lengths and temperature (checked)."""
    stop_ids, eos_tokens = self.decode.stop_ids, rollout_config.eos_tokens
    if eos_tokens is not None and set(eos_tokens) != set(stop_ids):
      raise ValueError(
          f"rollout_config.eos_tokens={eos_tokens} differs"
          f" from the rollout's stop_ids {stop_ids}; set one of them."
      )
    return dataclasses.replace(
        self.decode,
        max_new_tokens=rollout_config.max_tokens_to_generate,
        max_prompt_length=rollout_config.max_prompt_length,
        temperature=rollout_config.temperature,
    )

  def _denoiser(self, config: denoise.DenoiseConfig) -> denoise.Denoiser:
    with self._lock:
      if config not in self._denoisers:
        self._denoisers[config] = denoise.Denoiser(
            self._model,
            bd=self.bd,
            config=config,
            logits_fn=self.logits_fn,
            cached_logits_fn=self.cached_logits_fn,
        )
      return self._denoisers[config]

  def generate(
      self,
      prompts: list[str],
      rollout_config: compat.RolloutConfig,
      **kwargs,
  ) -> compat.RolloutOutput:
    """Decodes rendered prompts; the trace goes to the open collector.

    Returns Tunix's `RolloutOutput`: `text` and `tokens` (each row's
    completion before its first stop token), `left_padded_prompt_tokens`
    int32 `[batch, max_prompt_length]`; where Tunix has `diffusion_batch`,
    the trace's prepared batch and `logprobs` (each row's `action_logp`).
    """
    del kwargs
    context = self._local.context
    if context is None:
      raise ValueError(
          "DiffusionRollout.generate needs a generation context: drive it"
          " with DiffusionRLCluster (RLCluster would drop the trace)."
      )
    global_step, mode = context
    check_rollout_config(
        rollout_config, training=mode == "train", model_dtype=self._dtype
    )
    config = self.denoise_config(rollout_config)
    rows = []
    # GRPO repeats each prompt G times: encode each distinct one once.
    encoded = {}
    for i, prompt in enumerate(prompts):
      if not isinstance(prompt, str):
        raise ValueError(
            f"prompt {i} is a {type(prompt).__name__}, not a rendered string;"
            " the dataset's prompts must be an np.ndarray of str."
        )
      if prompt not in encoded:
        encoded[prompt] = self._tokenizer.encode(
            prompt, add_special_tokens=False
        )
      ids = list(encoded[prompt])
      if not 1 <= len(ids) <= config.max_prompt_length:
        raise ValueError(
            f"prompt {i} has {len(ids)} tokens; rollout.max_prompt_length is"
            f" {config.max_prompt_length} (and a prompt needs at least one"
            " token)."
        )
      rows.append(ids)
    with self._lock:
      call_index = self._calls.get(context, 0)
      self._calls[context] = call_index + 1
    seeds = row_seeds(self.seed, mode, global_step, call_index, len(rows))
    out = self._denoiser(config)(rows, seeds=seeds)
    if self._local.collectors:
      self._local.collectors[-1].append((out.trace, out.num_forwards))
    layout = trace_lib.to_tunix_layout(out.trace, pad_id=self.decode.pad_id)
    prepared = {}
    if compat.ROLLOUT_HAS_DIFFUSION_BATCH:
      # Tunix's own prepared-rollout scoring: the trace as its batch, and
      # each row's recorded log-prob of every action (full trace width).
      prepared = dict(
          diffusion_batch=replay_lib.diffusion_batch(out.trace),
          logprobs=list(np.asarray(out.trace.action_logp, np.float32)),
      )
    return compat.RolloutOutput(
        text=[self._tokenizer.decode(c.tolist()) for c in out.completions],
        logits=None,
        tokens=[np.asarray(c, np.int32) for c in out.completions],
        left_padded_prompt_tokens=layout["prompt_ids"],
        **{"logprobs": None, **prepared},
    )

  def get_per_token_logps(self, prompt_tokens, completion_tokens):
    raise ValueError(
        "a denoising rollout is scored from its trace (the canvas of each"
        " action), not from tokens; use DiffusionGRPOLearner, whose old and"
        " reference log-probs are trace replays (PPO is not supported)."
    )

  def update_params(self, params, filter_types=None) -> None:
    """Copies synced parameters into the rollout's own buffers, on device.

    `params` is the actor's state of `filter_types` (`nnx.Param`, or
    `nnx.LoRAParam` with LoRA). A rollout sharing the actor only checks that
    `params` are its own weights.
    """
    target = nnx.state(self._model, *(filter_types or (nnx.Param,)))
    if self.shares_actor:
      mine, theirs = jax.tree.leaves(target), jax.tree.leaves(params)
      if len(mine) != len(theirs) or any(
          a is not b for a, b in zip(mine, theirs)
      ):
        raise ValueError(
            "this rollout decodes with the actor's live weights; sync it"
            " from that actor only."
        )
      return
    nnx.update(self._model, role_shim.copy_params(params, target))
    logging.log_first_n(logging.INFO, "rollout weights synced.", 1)

  def pad_id(self) -> int:
    return self.decode.pad_id

  def eos_id(self) -> int:
    """The tokenizer's EOS id, or the first stop id if it has none."""
    return self._eos_id

  def model(self) -> nnx.Module:
    return self._model
