# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Files a run writes, where the workdir may be a URL (`gs://bucket/run`).

Every file the recipes write under a workdir goes through here, and so
through `etils.epath` (as Orbax's checkpoints do). A local write is atomic
(a temporary file, then `os.replace`), as an object store's is already;
only process 0 writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any, Iterator

from etils import epath


def is_url(path: str | os.PathLike[str]) -> bool:
  """Whether `path` names an object store location (`scheme://...`)."""
  return "://" in os.fspath(path)


def absolute(path: str) -> str:
  """`path` made absolute, unless it is a URL (`os.path.abspath` would make
  `gs://b/run` `<cwd>/gs:/b/run`)."""
  return path if is_url(path) else os.path.abspath(path)


def is_writer() -> bool:
  """Whether this process writes the run's files (process 0 only)."""
  # Imported here: the config and CLI modules that use this one run before
  # JAX may be imported (Pathways initialises first).
  import jax  # pylint: disable=g-import-not-at-top

  return jax.process_index() == 0


def exists(path: str) -> bool:
  return epath.Path(path).exists()


def list_dir(path: str) -> list[str]:
  """The names in directory `path` (sorted); empty if it does not exist."""
  directory = epath.Path(path)
  if not directory.is_dir():
    return []
  return sorted(child.name for child in directory.iterdir())


def read_text(path: str) -> str:
  return epath.Path(path).read_text(encoding="utf-8")


def read_json(path: str, fix: str) -> Any:
  """The JSON file `path`, parsed; one that is not JSON (cut short by a full
  disk) is a `ValueError` naming `path` and what to do (`fix`)."""
  try:
    return json.loads(read_text(path))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON ({e}); {fix}") from e


def write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` whole (never half a file), on process 0."""
  if not is_writer():
    return
  target = epath.Path(path)
  target.parent.mkdir(parents=True, exist_ok=True)
  if is_url(path):
    target.write_bytes(data)
    return
  tmp = f"{path}.tmp"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, path)


def write_text(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` whole, on process 0."""
  write_bytes(path, text.encode("utf-8"))


def append_lines(path: str, lines: list[str]) -> None:
  """Appends `lines` to the text file `path`, on process 0 (an object is
  rewritten whole, as object stores cannot append: batch the lines)."""
  if not is_writer() or not lines:
    return
  text = "".join(line + "\n" for line in lines)
  if is_url(path):
    target = epath.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(old + text, encoding="utf-8")
    return
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "a", encoding="utf-8") as f:
    f.write(text)


def remove_tree(path: str) -> None:
  """Deletes directory `path` and everything under it, if it exists."""
  directory = epath.Path(path)
  if directory.exists():
    directory.rmtree()


@contextlib.contextmanager
def local_staging(path: str) -> Iterator[str]:
  """A local directory standing in for `path`, for writers that need a
  local file system (safetensors, `save_pretrained`): `path` itself, or for
  a URL a temporary one copied there (on process 0) if the block succeeds;
  the temporary one is deleted either way.
  """
  if not is_url(path):
    yield path
    return
  with tempfile.TemporaryDirectory(
      prefix="tunix_bd_stage_", ignore_cleanup_errors=True
  ) as local:
    staged = os.path.join(local, "out")
    yield staged
    if is_writer():  # Copy what was written, tree for tree.
      for root, _, names in os.walk(staged):
        directory = epath.Path(path) / os.path.relpath(root, staged)
        directory.mkdir(parents=True, exist_ok=True)
        for name in names:
          with open(os.path.join(root, name), "rb") as src:
            with (directory / name).open("wb") as dst:
              shutil.copyfileobj(src, dst)
