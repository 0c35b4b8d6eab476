# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Provenance: the checkpoints a run reads, named by content.

A recipe that reads a model (SFT's AR checkpoint; OPD's teacher and student;
GRPO's policy and reference) identifies each one once, before any compute
(`tunix_bd.run.stage.Stage.identify`), and records it in two places:

  - its run fingerprint, as `SourceCheckpoint.fingerprint_field()`: the
    digests of the checkpoint's parts (`tunix_bd.models.checkpoint_digest`),
    so a resume with the same model under any path is accepted and one with
    other content under the same path is refused, naming the part
    (`model.checkpoint.weights`, ...);
  - what it writes for people to share (exports, reports), as
    `SourceCheckpoint.provenance()`: the digest, plus the path as the user
    wrote it when it lies inside the working directory; never an absolute
    path.

Data files enter fingerprints by content too (`run.stage.section_fields`).
"""

from __future__ import annotations

import dataclasses
import os

from tunix_bd.models import checkpoint_digest


@dataclasses.dataclass(frozen=True)
class SourceCheckpoint:
  """A checkpoint a run reads.

  Attributes:
    path: the directory, as configured.
    digest: the digests of its contents.
  """

  path: str
  digest: checkpoint_digest.CheckpointDigest

  def fingerprint_field(self) -> dict[str, str | None]:
    """The run-fingerprint value: `{part: digest}`, no path."""
    return self.digest.parts()

  def provenance(self) -> dict[str, str]:
    """`{"digest": ..., "path": ...}` for exports and reports.

    `path` is relative to the working directory, and left out when the
    checkpoint lies outside it (its absolute path would name the machine).
    """
    record = {"digest": self.digest.digest}
    path = portable_path(self.path)
    if path is not None:
      record["path"] = path
    return record


def identify(path: str | os.PathLike[str]) -> SourceCheckpoint:
  """Digests the checkpoint directory `path` (streamed, nothing loaded).

  Raises:
    ValueError: if `path` is not a checkpoint directory (see
      `checkpoint_digest.digest_checkpoint`).
  """
  path = os.fspath(path)
  return SourceCheckpoint(path, checkpoint_digest.digest_checkpoint(path))


def portable_path(
    path: str | os.PathLike[str], start: str | None = None
) -> str | None:
  """`path` relative to `start` (the working directory) if inside it.

  Returns:
    The normalized relative path (`.` for `start` itself), or None when
    `path` lies outside `start`.
  """
  start = os.path.abspath(os.getcwd() if start is None else start)
  relative = os.path.relpath(os.path.abspath(path), start)
  if relative == os.pardir or relative.startswith(os.pardir + os.sep):
    return None
  return relative
