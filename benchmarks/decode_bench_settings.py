# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`bench_decode`'s typed settings, all checked before any compute.

`DecodeBenchSettings` is the config's own keys (the prompts, batch sizes,
repeats, the trained workloads' commit rule, the report's path),
`TrainedWorkload` a `workload_settings` entry decoding two checkpoints, and
`fixed_schedule.FixedSchedule` one that decodes a random model (its
`kind="random"`); each dataclass is the one source of its defaults
(`configs/bench_decode.py` builds its sections from them). `validate` builds
them all from a config, with the `peer` section, erring on the first bad
value with its key.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from benchmarks import fixed_schedule
from benchmarks import peer as peer_lib
from tunix_bd import config_utils
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib

# The `kind` of a `workload_settings` entry that is a `FixedSchedule`.
RANDOM = fixed_schedule.RANDOM


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeBenchSettings:
  """The `bench_decode` config's own (top-level) keys.

  Attributes:
    workloads: which `workload_settings` entries to run, in order.
    num_prompts: eval prompts per trained workload.
    batch_sizes: every workload runs at each.
    rule: the trained workloads' commit rule, `threshold` or `factor`
      (Fast-dLLM's rule).
    threshold: its parameter under `threshold` (and the peer's).
    factor: its parameter under `factor`.
    repeats: passes over all batches; each batch counts its fastest.
    output: a path to also write the report as JSON; empty: none.
  """

  workloads: tuple[str, ...] = ("short", "long")
  num_prompts: int = 64
  batch_sizes: tuple[int, ...] = (1, 32)
  rule: str = commit_rules.THRESHOLD
  threshold: float = 0.9
  factor: float = 1.0
  repeats: int = 1
  output: str = ""

  def __post_init__(self):
    for name in ("workloads", "batch_sizes"):
      if isinstance(getattr(self, name), list):  # From a command line.
        object.__setattr__(self, name, tuple(getattr(self, name)))
    config_utils.check_int("num_prompts", self.num_prompts, 1)
    config_utils.check_int("repeats", self.repeats, 1)
    sizes = self.batch_sizes
    if not sizes or not all(isinstance(b, int) and b >= 1 for b in sizes):
      raise ValueError(f"batch_sizes must be ints >= 1, got {sizes}.")
    if max(sizes) > self.num_prompts:
      raise ValueError(
          f"batch size {max(sizes)} exceeds num_prompts={self.num_prompts}."
      )
    try:
      denoise.DenoiseConfig(
          max_new_tokens=1, max_prompt_length=1, **self.commit_rule()
      )
    except ValueError as e:
      raise ValueError(f"rule, threshold, factor: {e}") from None

  def commit_rule(self) -> dict[str, Any]:
    """The trained workloads' commit rule and its parameter."""
    if self.rule == commit_rules.FACTOR:
      return dict(rule=self.rule, factor=self.factor)
    return dict(rule=self.rule, threshold=self.threshold)

  def title(self) -> str:
    """The report table's title."""
    rule = " ".join(f"{v}" for v in self.commit_rule().values())
    return (
        f"Decode benchmark: {self.num_prompts} eval prompts per trained"
        f" workload, rule {rule}"
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainedWorkload:
  """A `workload_settings` entry: an AR model and its conversion.

  Attributes:
    tasks: the embedded tasks whose eval prompts it decodes.
    max_new_tokens: the generation budget.
    ar_checkpoint: the AR teacher (`ar_pretrain.py`'s export).
    bd_checkpoint: its block-diffusion conversion (`sft.py`'s export).
  """

  tasks: tuple[str, ...] = tasks_lib.DEFAULT_TASKS
  max_new_tokens: int = 16
  ar_checkpoint: str = config_utils.source(
      config_utils.CHECKPOINT,
      "runs/quickstart/ar_pretrain/export",
      required=True,
  )
  bd_checkpoint: str = config_utils.source(
      config_utils.CHECKPOINT, "runs/quickstart/sft/export", required=True
  )

  def directory_hint(self, key: str) -> str:
    """What to do when checkpoint `key` is missing (`check_directories`)."""
    del key
    return (
        "; run `quickstart.py` (short) or `quickstart.py:long` (long)"
        " first, or point it at your exports."
    )


@dataclasses.dataclass(frozen=True)
class DecodeBench:
  """A `bench_decode` config, checked.

  Attributes:
    settings: the config's own keys.
    workloads: per name of `settings.workloads`, in order, a
      `TrainedWorkload` or a `FixedSchedule`.
    peer: the `peer` section, or None when it is off.
  """

  settings: DecodeBenchSettings
  workloads: Mapping[str, TrainedWorkload | fixed_schedule.FixedSchedule]
  peer: peer_lib.PeerSettings | None


def workload(
    section: Any, key: str
) -> TrainedWorkload | fixed_schedule.FixedSchedule:
  """A `workload_settings` entry as its dataclass, checked; errors name `key`."""
  if config_utils.section_dict(section, key).get("kind") == RANDOM:
    return fixed_schedule.FixedSchedule.from_section(section, key)
  trained = config_utils.from_section(TrainedWorkload, section, key)
  trained = dataclasses.replace(trained, tasks=tuple(trained.tasks))
  config_utils.check_int(f"{key}.max_new_tokens", trained.max_new_tokens, 1)
  tasks_lib.check_names(trained.tasks, f"{key}.tasks")
  return trained


def validate(config: Any) -> DecodeBench:
  """Every setting of a `bench_decode` config, before any compute.

  Raises:
    ValueError: naming the key, for the first bad value; only the workloads
      `workloads` names are read.
  """
  own = {
      f.name: config[f.name]
      for f in dataclasses.fields(DecodeBenchSettings)
      if f.name in config
  }
  if own.get("output"):
    workdir_lib.check_file(own["output"], "output")
  settings = DecodeBenchSettings(**own)
  peer = peer_lib.from_section(config.peer)
  peer = peer if peer.enabled else None
  entries = config.workload_settings
  unknown = [w for w in settings.workloads if w not in entries]
  if not settings.workloads or unknown:
    raise ValueError(
        "workloads must name entries of workload_settings"
        f" {sorted(entries)}, got {settings.workloads}."
    )
  if peer is not None and settings.rule != commit_rules.THRESHOLD:
    raise ValueError(
        f"rule={settings.rule!r}: the peer decodes by threshold; use"
        " rule='threshold' or set peer.python=''."
    )
  workloads = {}
  for name in settings.workloads:
    key = f"workload_settings.{name}"
    if peer is not None and entries[name].get("kind") == RANDOM:
      raise ValueError(
          f"workloads: {name!r} is a random workload (a model built in"
          " memory), which the peer cannot load; run it without"
          " peer.python."
      )
    workloads[name] = workload(entries[name], key)
  # The values first, then what they name on disk.
  for name, checked in workloads.items():
    if isinstance(checked, TrainedWorkload):
      key = f"workload_settings.{name}"
      provenance.check_directories(checked, key)
      if peer is not None:
        peer_lib.check_checkpoint(
            peer, checked.bd_checkpoint, f"{key}.bd_checkpoint"
        )
  return DecodeBench(settings, workloads, peer)
