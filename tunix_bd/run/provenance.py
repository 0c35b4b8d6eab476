# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Provenance: the checkpoints a run reads, named by content.

Each is identified once, before any compute (`Stage.identify`): the run
fingerprint holds its parts' digests, no path; what a run writes to share
holds the digest, and a path only inside the working directory.
`section_fields` is the one fingerprint rule of a typed section
(docs/design.md, "Fingerprint"); `check_directories` fails closed on a
checkpoint directory a run cannot read.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.models import checkpoint_digest
from tunix_bd.run import workdir as workdir_lib


@dataclasses.dataclass(frozen=True)
class SourceCheckpoint:
  """A checkpoint a run reads: its directory as configured, and the digests
  of its contents."""

  path: str
  digest: checkpoint_digest.CheckpointDigest

  def provenance(self) -> dict[str, str]:
    """`{"digest": ..., "path": ...}` for exports and reports; `path`,
    relative, only inside the working directory (else it names the machine).
    """
    record = {"digest": self.digest.digest}
    path = os.path.relpath(os.path.abspath(self.path), os.getcwd())
    if path != os.pardir and not path.startswith(os.pardir + os.sep):
      record["path"] = path
    return record


def identify(path: str | os.PathLike[str]) -> SourceCheckpoint:
  """Digests the checkpoint directory `path` (streamed, nothing loaded)."""
  path = os.fspath(path)
  return SourceCheckpoint(path, checkpoint_digest.digest_checkpoint(path))


def checkpoint_directories(settings) -> dict[str, str]:
  """`{key: path}` of the checkpoints a `model` section makes a run read:
  required ones even when empty, optional ones when set, none that
  `random_init` replaces."""
  random_init = getattr(settings, "random_init", False)
  paths = {}
  for field in dataclasses.fields(settings):
    if field.metadata.get(config_utils.SOURCE) != config_utils.CHECKPOINT:
      continue
    required = field.metadata.get("required")
    path = getattr(settings, field.name)
    if (required and not random_init) or (not required and path):
      paths[field.name] = path
  return paths


# The commands that make the inputs of the configs' other variants (the
# `directory_hint`s name those of the embedded default).
_TUNIX_RUN = "tunix run --plugin tunix_bd"
_MADE_BY = {
    "runs/ar_pretrain_long/export": f"{_TUNIX_RUN} ar_pretrain.py:long",
    "runs/quickstart_long/sft/export": f"{_TUNIX_RUN} quickstart.py:long",
    "runs/sft_long8/export": f"{_TUNIX_RUN} sft.py:long8",
    "runs/sft_weak/export": (
        f"{_TUNIX_RUN} sft.py --config.train.max_steps=100"
        " --config.model.checkpoint=runs/quickstart/ar_pretrain/export"
        " --config.workdir=runs/sft_weak"
    ),
}


def check_directories(settings, section: str = "model") -> None:
  """Fails closed on a checkpoint directory that does not exist, is a
  run's workdir rather than its export, or whose `*.safetensors` files are
  cut short (`checkpoint_digest`)."""
  for key, path in checkpoint_directories(settings).items():
    if not os.path.isdir(path):
      made = {os.path.abspath(k): v for k, v in _MADE_BY.items()}
      command = made.get(os.path.abspath(path))
      hint = f"; make it with `{command}`." if command else None
      raise ValueError(
          f"{section}.{key}={path!r} is not a directory"
          f"{hint or settings.directory_hint(key) or '.'}"
      )
    if not os.path.exists(os.path.join(path, "config.json")):
      _check_not_a_run(path, f"{section}.{key}={path!r}")
    try:
      checkpoint_digest.check_weight_files(path)
    except ValueError as e:
      raise ValueError(f"{section}.{key}={path!r}: {e}") from e


def _check_not_a_run(path: str, named: str) -> None:
  """Fails closed on a run's workdir, its `checkpoints/` or an Orbax step
  directory under it (training state, not a model), naming its export."""
  path = run = os.path.abspath(path)
  for _ in range(3):  # The workdir, `checkpoints/`, a step directory.
    export = os.path.join(run, "export")
    if os.path.isfile(os.path.join(export, "config.json")):
      what = "a run's workdir" if run == path else "in a run's workdir"
      raise ValueError(
          f"{named} is {what}; its model is {export!r}: pass that."
      )
    run = os.path.dirname(run)
  parent, name = os.path.split(path)
  if name.isdigit() and os.path.basename(parent) == workdir_lib.CHECKPOINTS:
    raise ValueError(
        f"{named} is an Orbax training checkpoint, not a model; its run"
        " writes the model to WORKDIR/export when it ends: pass that."
    )


def section_fields(
    settings: Any, identify: Callable[[str], SourceCheckpoint]
) -> dict[str, Any]:
  """A typed section's fingerprint fields by the one rule; `identify`
  digests the checkpoints it makes the run read."""
  read = checkpoint_directories(settings)
  fields = {}
  for field in dataclasses.fields(settings):
    if field.metadata.get(config_utils.RESUMABLE):
      continue
    value = getattr(settings, field.name)
    kind = field.metadata.get(config_utils.SOURCE)
    if dataclasses.is_dataclass(value):
      value = section_fields(value, identify)
    elif kind == config_utils.CHECKPOINT:
      path = read.get(field.name)
      value = identify(path).digest.parts() if path else None  # No path.
    elif kind == config_utils.FILE and value:
      digest = checkpoint_digest.digest_file(value)
      value = f"{fingerprint_lib.DIGEST_PREFIX}{digest}"
    fields[field.name] = value
  return fields
