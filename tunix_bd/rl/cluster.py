# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`DiffusionRLCluster`: Tunix's `RLCluster` that keeps the rollout's trace.

Tunix's `RLCluster.generate` drops any extra rollout field, and its
reference and old log-probs score tokens autoregressively. Here `generate`
seeds the rollout (global step, mode) and returns the checked `Trace`, and
`reference_replay_logps` / `anchor_replay_logps` score a trace by replay on
the REFERENCE and ACTOR meshes. See docs/design.md "Why the rollout rules".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

from flax import nnx
import jax
import numpy as np

from tunix_bd import compat
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import eos
from tunix_bd.core import replayer as replayer_lib
from tunix_bd.core import trace as trace_lib
from tunix_bd.rl import rollout as rollout_lib
from tunix_bd.training import aux_metrics

Role = compat.Role
Mode = compat.Mode
# The largest |anchor replay - recorded| log-prob of a rollout's actions
# (Tunix's name for it).
PARITY_METRIC = "diffusion/rollout_anchor_logp_abs_max"


@dataclasses.dataclass
class DiffusionRolloutOutput(compat.RolloutOutput):
  """Tunix's `RolloutOutput` plus the rollout's `trace` (rows in prompt
  order) and int32 `[batch]` `num_forwards`, the forwards each row needed."""

  trace: trace_lib.Trace | None = None
  num_forwards: np.ndarray | None = None


def speed_metrics(lengths, forwards: np.ndarray) -> dict[str, Any]:
  """Tokens per forward and forwards per row, as Tunix buffers metrics, of
  each row's visible completion `lengths` and model `forwards`."""
  return {
      "diffusion/tokens_per_forward": (
          float(np.sum(lengths) / max(int(forwards.sum()), 1)),
          np.mean,
      ),
      "diffusion/forwards_per_row": (np.mean(forwards), np.mean),
  }


class DiffusionRLCluster(compat.RLCluster):
  """An `RLCluster` for a `DiffusionRollout` (see the module docstring)."""

  def __init__(self, *, fingerprint: Mapping[str, Any] | None = None, **kwargs):
    """Builds Tunix's cluster; `fingerprint` goes into every actor
    checkpoint's metadata, and each actor checkpoint writes its step's
    train metrics. Refuses `offload_to_cpu`: Tunix's offload path syncs
    unfiltered state into the rollout, untested with a denoising one.
    """
    config = kwargs["cluster_config"]
    engine = config.rollout_engine
    func = getattr(engine, "func", engine)
    if not isinstance(func, type) or not issubclass(
        func, rollout_lib.DiffusionRollout
    ):
      raise ValueError(
          "cluster_config.rollout_engine must be a DiffusionRollout (or a"
          f" functools.partial of it), got {engine!r}."
      )
    if config.offload_to_cpu:
      raise ValueError(
          "cluster_config.offload_to_cpu is not supported with a diffusion"
          " rollout; set it False."
      )
    super().__init__(**kwargs)
    if self.rollout.shares_actor:
      self._anchor_snapshot = None  # Tunix's host copy; never read.
    self._reference_replayer: replayer_lib.Replayer | None = None
    self._actor_replayer: replayer_lib.Replayer | None = None
    self._checks_every: int | None = None
    # Tunix builds the rollout before the actor trainer restores a
    # checkpoint: a resumed run must roll out with the restored weights
    # (the anchor snapshot is already taken from them), which a rollout
    # sharing the actor already does.
    if self.actor_trainer.train_steps and not self.rollout.shares_actor:
      actor = self.actor_trainer.model
      filter_types = (
          nnx.LoRAParam if compat.is_lora_enabled(actor) else nnx.Param,
      )
      self.rollout.update_params(nnx.state(actor, filter_types), filter_types)
    aux_metrics.write_metrics_at_checkpoints(self.actor_trainer)
    if fingerprint is not None:
      tunix_metadata = self.actor_trainer.custom_checkpoint_metadata_fn
      fields = dict(fingerprint)
      # Tunix reads `global_step` back on resume: keep its fields.
      self.actor_trainer.custom_checkpoint_metadata_fn = lambda: {
          **tunix_metadata(),
          fingerprint_lib.METADATA_KEY: fields,
      }

  @property
  def _anchor_policy_state(self):
    """Tunix's anchor, the actor state old log-probs are scored under: its
    snapshot at each weight sync, or the live state of a shared actor."""
    if self.rollout.shares_actor:
      return nnx.state(self.actor_trainer.model)
    return self._anchor_snapshot

  @_anchor_policy_state.setter
  def _anchor_policy_state(self, state):
    self._anchor_snapshot = state

  def log_rollout_checks(self, verify_replay_every_n_steps: int) -> None:
    """Makes `generate` log what tunix_bd's learner logs, for another: each
    rollout's `speed_metrics`, and every `verify_replay_every_n_steps` global
    steps (0: never) a training rollout's `PARITY_METRIC`."""
    self._checks_every = verify_replay_every_n_steps

  def generate(
      self,
      prompts,
      apply_chat_template: bool = False,
      mode: Mode = Mode.TRAIN,
      micro_batch_size: int | None = None,
      trace_tags: Mapping[str, Any] | None = None,
      max_generation_steps: int | None = None,
  ) -> DiffusionRolloutOutput:
    """`RLCluster.generate`, returning the trace as well; checks that each
    visible completion is its trace's tokens cut at the first stop token."""
    rollout = self.rollout
    rollout.set_generation_context(global_step=self.global_steps, mode=mode)
    with rollout.collect_traces() as collected:
      out = super().generate(
          prompts,
          apply_chat_template=apply_chat_template,
          mode=mode,
          micro_batch_size=micro_batch_size,
          trace_tags=trace_tags,
          max_generation_steps=max_generation_steps,
      )
    # One trace of the chunks (decoded with the same settings), in order.
    trace = jax.tree.map(
        lambda *xs: np.concatenate(xs, axis=0), *[t for t, _ in collected]
    )
    forwards = np.concatenate([f for _, f in collected]).astype(np.int32)
    visible = eos.truncate_at_stop(
        np.asarray(trace.tokens), rollout.decode.stop_ids
    )
    pairs = enumerate(zip(out.tokens, visible))
    bad = [r for r, (t, v) in pairs if not np.array_equal(np.asarray(t), v)]
    if len(visible) != len(out.tokens) or bad:
      raise ValueError(
          f"rollout tokens of rows {bad[:8]} are not their traces' tokens"
          " cut at the first stop token."
      )
    if self._checks_every is not None:
      lengths = [len(v) for v in visible]
      self.buffer_metrics(speed_metrics(lengths, forwards), mode=mode)
      if self.replay_check_due(self._checks_every, mode):
        self.anchor_replay_with_parity(trace, micro_batch_size, mode)
    return DiffusionRolloutOutput(
        **{f.name: getattr(out, f.name) for f in dataclasses.fields(out)},
        trace=trace,
        num_forwards=forwards,
    )

  def replay_check_due(self, every: int, mode: Mode) -> bool:
    """Whether this is a training step on the `every`-step parity cadence."""
    return mode == Mode.TRAIN and every > 0 and self.global_steps % every == 0

  def anchor_replay_with_parity(
      self, trace: trace_lib.Trace, micro_batch_size: int | None, mode: Mode
  ) -> np.ndarray:
    """`anchor_replay_logps` in Tunix's span, buffering `PARITY_METRIC`."""
    with compat.grpo_perf_span(
        self, "old_actor_inference", role=Role.ACTOR
    ) as end:
      anchor = self.anchor_replay_logps(trace, micro_batch_size)
      end([anchor])
    generated = np.asarray(trace.action_step) >= 0
    error = np.abs(anchor - np.asarray(trace.action_logp))[generated]
    self.buffer_metrics(
        {PARITY_METRIC: (float(error.max(initial=0.0)), np.max)}, mode=mode
    )
    return anchor

  def _replay(self, replay, trace, micro_batch_size) -> np.ndarray:
    rows = np.asarray(trace.prompt_lengths).shape[0]
    size = micro_batch_size or rows
    parts = [
        np.asarray(replay(jax.tree.map(lambda x, s=s: x[s : s + size], trace)))
        for s in range(0, rows, size)
    ]
    return np.concatenate(parts, axis=0)

  def _replayer(self, model) -> replayer_lib.Replayer:
    """A replayer of `model` that scores as the rollout samples."""
    return replayer_lib.Replayer(
        model,
        cached_logits_fn=self.rollout.cached_logits_fn,
        logits_chunk=self.rollout.logits_chunk,
    )

  def has_reference(self) -> bool:
    """Whether the cluster holds a reference model (Tunix's public
    `InferenceWorker.get_model` refuses a role it does not hold)."""
    try:
      self.inference_worker.get_model("reference")
    except ValueError:
      return False
    return True

  def reference_replay_logps(
      self, trace: trace_lib.Trace, micro_batch_size: int | None = None
  ) -> np.ndarray:
    """float32 `[batch, T]` log-probs of the trace's actions, by reference."""
    with self._get_mesh_and_logical_axis_rules_cm(Role.REFERENCE):
      if self._reference_replayer is None:
        # The reference never changes: split it and compile once.
        reference = self.inference_worker.get_model("reference")
        self._reference_replayer = self._replayer(reference)
      return self._replay(self._reference_replayer, trace, micro_batch_size)

  def anchor_replay_logps(
      self, trace: trace_lib.Trace, micro_batch_size: int | None = None
  ) -> np.ndarray:
    """float32 `[batch, T]` log-probs under the start-of-step actor snapshot:
    Tunix's anchor policy state, the policy that sampled the trace."""
    with self._get_mesh_and_logical_axis_rules_cm(Role.ACTOR):
      if self._actor_replayer is None:
        # The actor's structure never changes: compile once, and replay
        # each step's snapshot state through it.
        self._actor_replayer = self._replayer(self.actor_trainer.model)
      state = compat.put_params_on_memory_kind(
          self._anchor_policy_state, self._default_memory_kind
      )
      replay = functools.partial(self._actor_replayer, state=state)
      return self._replay(replay, trace, micro_batch_size)
