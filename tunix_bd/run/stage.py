# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The run skeleton every recipe follows, and its one fingerprint rule.

A training recipe is five steps, in this order, whatever it trains:

  stage = Stage(config, SftConfig)  # 1. Validate before compute: workdir,
  plan = sources.plan_export(...)   #    sections, checkpoints, the export.
  stage.check_fingerprint(bd=...)   # 2. Sources by digest, 3. the
      # fingerprint by the one rule (docs/design.md "Fingerprint"): a
      # resume under other settings is refused before any model is built.
  stage.start(trainer.train_steps)  # 4. Record the resume line and the
      # fingerprint, every check passed; then train and evaluate.
  plan.write(model, tokenizer, bd, extra=...)  # 5. Export, with provenance.

A recipe's config is a frozen dataclass whose fields are its typed sections
(`eval: options.Eval`), each a class whose fields are the section's keys. A
benchmark recipe takes step 1 alone (`writes="output"`: one report file).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
import typing
from typing import Any, Callable, Generic, Iterator

import ml_collections

from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib

SettingsT = typing.TypeVar("SettingsT")
_VALUES_ONLY = contextvars.ContextVar("values_only", default=False)


@contextlib.contextmanager
def values_only() -> Iterator[None]:
  """Within it, `Stage` checks its sections' values alone, not the workdir,
  output or checkpoints: `tunix run --dry_run` may run where they are not."""
  token = _VALUES_ONLY.set(True)
  try:
    yield
  finally:
    _VALUES_ONLY.reset(token)


def launch(run: Callable[..., Any]) -> Callable[..., Any]:
  """A recipe's `run(config)`, within `workdir.launching` and
  `workdir.checkpointing`."""

  @functools.wraps(run)
  def launched(config: ml_collections.ConfigDict) -> Any:
    with workdir_lib.launching():
      with workdir_lib.checkpointing(config.get("workdir")):
        return run(config)

  return launched


class Stage(Generic[SettingsT]):
  """One launch of a recipe: its checked, typed config and bookkeeping.

  Attributes:
    workdir: `config.workdir` (None for a run that writes one `output`).
    settings: the recipe's config class, each field its typed section
      (`stage.settings.train`).
    fingerprint: the run fingerprint, once `check_fingerprint` ran.
  """

  def __init__(
      self,
      config: ml_collections.ConfigDict,
      spec: type[SettingsT],
      *,
      writes: str = "workdir",
  ):
    """Validates before any compute: workdir, sections, checkpoints.

    Args:
      spec: the recipe's config class (module docstring), its sections in
        check order, each read by `config_utils.from_section`.
      writes: `workdir`, a directory; `output`, one report file (empty:
        none); or `output_or_workdir`, `output` when set, else `workdir`.
    """
    if writes not in ("workdir", "output", "output_or_workdir"):
      raise ValueError(f"writes must name workdir or output, got {writes!r}.")
    self._lock = None
    self._holds = False  # Whether `hold` locks the workdir.
    paths = not _VALUES_ONLY.get()  # False for `--dry_run`'s value check.
    if paths and writes != "workdir" and config.output:
      workdir_lib.check_file(config.output, "output")
    elif paths and writes != "output":
      workdir_lib.check(config.workdir)
      # An existing workdir is held from here; a new one from `hold`, once
      # the checks that need no model passed.
      self._holds = True
      self._lock = workdir_lib.lock(config.workdir, create=False)
    self.config = config
    self.workdir = config.get("workdir")
    hints, sections = typing.get_type_hints(spec), {}
    for f in dataclasses.fields(spec):
      cls = hints[f.name]
      if getattr(cls, "SECTION", None) != "":
        section = config[f.name]
      else:  # Top-level keys (`compare`'s `thresholds`, ...) the config sets.
        keys = {g.name for g in dataclasses.fields(cls) if g.init}
        section = {k: v for k, v in config.items() if k in keys}
      sections[f.name] = config_utils.from_section(cls, section, f.name)
    self.settings: SettingsT = spec(**sections)
    model = getattr(self.settings, "model", None)
    if paths and model is not None:
      provenance.check_directories(model)
    self.fingerprint: dict[str, Any] | None = None
    self._identified: dict[str, provenance.SourceCheckpoint] = {}

  @property
  def random_init(self) -> bool:
    """Whether the run starts from a random model (`model.random_init`)."""
    model = getattr(self.settings, "model", None)
    return bool(getattr(model, "random_init", False))

  def output_path(self, default_name: str) -> str:
    """`output` when set, else `default_name` under the workdir."""
    return self.config.get("output") or os.path.join(self.workdir, default_name)

  @property
  def export_dir(self) -> str:
    return os.path.join(self.workdir, "export")

  def identify(self, path: str) -> provenance.SourceCheckpoint:
    """Checkpoint `path` by content, digested once per run."""
    if path not in self._identified:
      self._identified[path] = provenance.identify(path)
    return self._identified[path]

  def check_fingerprint(self, **derived: Any) -> dict[str, Any]:
    """The run fingerprint (kept as `self.fingerprint`); refuses to resume
    checkpoints of other settings. `derived`: what the run derives from its
    sources that changes its checkpoints' meaning (`bd=bd.to_dict()`)."""
    sections = {
        f.name: provenance.section_fields(
            getattr(self.settings, f.name), self.identify
        )
        for f in dataclasses.fields(self.settings)
    }
    fields = {
        "recipe": self.config.recipe,
        "seed": self.config.seed,
        # A section of resumable fields alone (`mesh`, `eval`) adds nothing.
        **{name: fields for name, fields in sections.items() if fields},
        **derived,
    }
    self.fingerprint = fingerprint_lib.fingerprint(fields)
    self.hold()
    fingerprint_lib.check(
        workdir_lib.checkpoints(self.workdir), self.fingerprint
    )
    return self.fingerprint

  def hold(self) -> None:
    """Holds the workdir (a new one is made): before the run computes.

    Nothing for a run writing `output`.
    """
    if self._holds and self._lock is None:
      self._lock = workdir_lib.lock(self.workdir)

  def restoring(self):
    """Around building the trainer: `workdir.restoring`."""
    return workdir_lib.restoring(self.workdir)

  def start(
      self,
      restored_step: int,
      relogged_from: Callable[[str], int] | None = None,
  ) -> None:
    """Right before the first step: `resumed`, then `record`."""
    self.resumed(restored_step, relogged_from)
    self.record()

  def resumed(
      self,
      restored_step: int,
      relogged_from: Callable[[str], int] | None = None,
  ) -> None:
    """Once the trainer restored its checkpoint (`workdir.resumed`)."""
    workdir_lib.resumed(
        self.workdir,
        restored_step,
        recipe=self.config.recipe,
        relogged_from=relogged_from,
    )
    train = getattr(self.settings, "train", None)  # `options.Train`.
    if train and restored_step >= train.max_steps:
      print(
          f"{self.config.recipe}: train.max_steps={train.max_steps} is not"
          f" above the restored step {restored_step}: no step to train.",
          flush=True,
      )

  def stopped(self, step: int) -> None:
    """After training: says so when `train.time_budget_s` ended it early."""
    train = getattr(self.settings, "train", None)
    if train and train.seconds and step < train.max_steps:
      print(
          f"{self.config.recipe}: train.time_budget_s={train.time_budget_s:g}"
          f" spent: stopped at step {step} of"
          f" train.max_steps={train.max_steps}.",
          flush=True,
      )

  def record(self) -> None:
    """Records the fingerprint: once every check has passed."""
    fingerprint_lib.record(
        workdir_lib.checkpoints(self.workdir), self.fingerprint
    )
    workdir_lib.started(self.workdir)

  def provenance(self, key: str) -> dict[str, Any]:
    """Checkpoint `model.<key>` as exports record it; a random model's mark."""
    if self.random_init:
      return {"random_init": True}
    return self.identify(getattr(self.settings.model, key)).provenance()

  def provenances(self, *keys: str) -> dict[str, Any]:
    """`{key: provenance(key)}`; `{"random_init": True}` for a random model."""
    if self.random_init:
      return {"random_init": True}
    return {key: self.provenance(key) for key in keys}
