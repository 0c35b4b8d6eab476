# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The workdir rule every recipe follows: where a run writes, and when.

`check` before anything loads; `lock` holds the workdir for one run, and
within `launching` a launch that fails before it `started` removes what its
lock made; `resumed` once the trainer restored its checkpoint. `restoring`
and `checkpointing` say in one line that Orbax cannot read a checkpoint, or
save one for lack of space. Local workdirs are made absolute (Orbax needs
that), URLs stay URLs. docs/recipes.md, "Runs: logs, checkpoints, resume".
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import traceback
from typing import Callable, IO, Iterator
import weakref

from etils import epath

from tunix_bd import files
from tunix_bd.training import metrics

CHECKPOINTS = "checkpoints"
LOCK_FILE = ".lock"

# The locks this process holds, by workdir: a process may take its own lock
# again (quickstart's stages, a recipe's `validate` then `run`).
_held: weakref.WeakValueDictionary[str, IO[str]] = weakref.WeakValueDictionary()
# Per open launch (`launching`), innermost last: `(workdir, made)` of each
# lock it took that made `made` (the workdir or a parent, or `.lock`).
_launches: list[list[tuple[str, str]]] = []
_started: set[str] = set()  # Workdirs whose run started, in open launches.


def check(workdir: str, key: str = "workdir") -> str:
  """Fails closed, naming `key`, on a workdir that is unset, is (or lies
  under) a file, or this process cannot make or write; writes nothing.

  Returns:
    The workdir by the one path rule (`checkpoints` uses the same).
  """
  if not workdir:
    raise ValueError(f"{key} must be set.")
  if files.is_url(workdir):
    # An object store has no parent directories to create, nor read-only
    # mounts; only an object already at the workdir's name is in the way.
    path = epath.Path(workdir)
    if path.exists() and not path.is_dir():
      raise ValueError(
          f"{key}={workdir!r} names an existing object, not a directory."
      )
    return workdir
  path = os.path.abspath(workdir)
  if os.path.lexists(path) and not os.path.isdir(path):
    raise ValueError(
        f"{key}={workdir!r} names an existing file, not a directory."
    )
  why = _why_not_writable(path)
  if why:
    raise ValueError(f"{key}={workdir!r} cannot be written: {why}.")
  return path


def check_file(path: str, key: str) -> None:
  """Fails closed, naming `key`, on an output file that cannot be written."""
  if files.is_url(path):
    check(os.path.dirname(path), key=key)
    return
  path = os.path.abspath(path)
  why = (
      f"{path!r} is a directory"
      if os.path.isdir(path)
      else _why_not_writable(os.path.dirname(path))
  )
  if why:
    raise ValueError(f"{key}={path!r} cannot be written: {why}.")


def _why_not_writable(path: str) -> str | None:
  """Why local directory `path` cannot be made and written to, or None."""
  existing = path
  while not os.path.lexists(existing):  # The part that exists already.
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    return f"{existing!r} is a file"
  # access() answers EROFS on a read-only mount, whoever the user is.
  if not os.access(existing, os.W_OK | os.X_OK):
    return (
        f"{existing!r} is on a read-only file system or not writable by"
        " this user"
    )
  return None


def lock(workdir: str, *, create: bool = True) -> IO[str] | None:
  """Holds the workdir for this process, or refuses naming the holder.

  The lock lasts while the returned handle is referenced (`Stage` keeps
  it); the OS drops it when the process dies, so a killed run never blocks
  its relaunch. Taken by the writing process only; not on a URL workdir nor
  a file system without `flock` (a note says so). `create`: make the
  workdir if missing.

  Returns:
    The held lock file, or None where none is taken.
  """
  if files.is_url(workdir):
    return None
  path = os.path.abspath(workdir)
  held = _held.get(path)
  if held is not None:
    return held
  if not files.is_writer() or (not create and not os.path.isdir(path)):
    return None
  made, missing = None, os.path.join(path, LOCK_FILE)
  while not os.path.lexists(missing):  # The outermost path this lock makes.
    made, missing = missing, os.path.dirname(missing)
  os.makedirs(path, exist_ok=True)
  handle = open(os.path.join(path, LOCK_FILE), "a+", encoding="utf-8")
  try:
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    handle.seek(0)
    holder = handle.read().strip()
    handle.close()
    try:
      holder = "pid {pid} on {host}, started {started}".format(
          **json.loads(holder)
      )
    except (ValueError, KeyError, TypeError):
      holder = "another process"
    raise ValueError(
        f"workdir={workdir!r} is in use by a live run ({holder}); wait for"
        " it to end, stop it, or choose another workdir."
    ) from None
  except OSError as e:  # No flock here (some network file systems).
    handle.close()
    print(f"workdir={workdir!r} is not locked: {e.strerror}.", flush=True)
    return None
  handle.truncate(0)
  started = datetime.datetime.now(datetime.timezone.utc)
  json.dump(
      {
          "pid": os.getpid(),
          "host": socket.gethostname(),
          "started": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
      },
      handle,
  )
  handle.flush()
  _held[path] = handle
  if made and _launches:
    _launches[-1].append((path, made))
  return handle


def started(workdir: str) -> None:
  """Marks the run in `workdir` started: a failure now keeps what it made.

  Its enclosing workdirs (a chain's, `quickstart`) are kept with it.
  """
  if not files.is_url(workdir):
    _started.add(os.path.abspath(workdir))


@contextlib.contextmanager
def launching() -> Iterator[None]:
  """Around one launch: if it fails before its run `started`, each workdir
  is left as it was: one its locks made is removed with whatever the launch
  wrote there (nobody else wrote: the lock was held), a `.lock` it added to
  an existing one too.
  """
  made: list[tuple[str, str]] = []
  _launches.append(made)
  try:
    yield
  except BaseException:
    for path, what in reversed(made):
      if any(s == path or s.startswith(path + os.sep) for s in _started):
        continue
      if os.path.isdir(what):
        shutil.rmtree(what, ignore_errors=True)
      else:
        with contextlib.suppress(OSError):
          os.remove(what)
      handle = _held.pop(path, None)
      if handle is not None:
        handle.close()
    raise
  finally:
    _launches.pop()
    if not _launches:
      _started.clear()


def checkpoints(workdir: str) -> str:
  """`workdir/checkpoints` by the one path rule (a URL stays a URL)."""
  return os.path.join(files.absolute(workdir), CHECKPOINTS)


@contextlib.contextmanager
def restoring(workdir: str) -> Iterator[None]:
  """Around building a trainer, which restores the newest checkpoint: a
  checkpoint Orbax cannot read fails in one line naming the step directory
  to move away."""
  try:
    yield
  except Exception as e:  # Orbax raises plain `Exception`s.
    frames = traceback.extract_tb(e.__traceback__)
    names = files.list_dir(checkpoints(workdir))
    steps = sorted(int(name) for name in names if name.isdigit())
    if not steps or not any("/orbax/" in f.filename for f in frames):
      raise
    bad = os.path.join(checkpoints(workdir), str(steps[-1]))
    why = str(e).strip().split("\n", 1)[0].split(" See full", 1)[0]
    then = f"resume from step {steps[-2]}" if len(steps) > 1 else "start over"
    raise ValueError(
        f"checkpoint {bad!r} cannot be restored ({why.rstrip('.')}); move"
        f" that directory away to {then}."
    ) from e


# A full disk, a full quota, a file past the size limit (`ulimit -f`).
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextlib.contextmanager
def checkpointing(workdir: str | None) -> Iterator[None]:
  """Around a run: a checkpoint save that runs out of space fails in one
  line naming `workdir/checkpoints` and the way out.

  Orbax raises the `OSError`, or TensorStore's `ValueError` (`...
  [os_error_code='28']`) naming a temporary file.
  """
  try:
    yield
  except (OSError, ValueError) as e:
    found = re.search(r"\[os_error_code='?(\d+)", str(e))
    code = e.errno if isinstance(e, OSError) else found and int(found[1])
    frames = traceback.extract_tb(e.__traceback__)
    if not (
        workdir
        and code in _NO_SPACE
        and any("/orbax/" in f.filename for f in frames)
    ):
      raise
    raise ValueError(
        f"saving a checkpoint in {checkpoints(workdir)!r} failed:"
        f" {os.strerror(code)}; free space there, then a relaunch with the"
        " same workdir resumes from the last complete checkpoint."
    ) from e


def resumed(
    workdir: str,
    step: int,
    *,
    recipe: str,
    relogged_from: Callable[[str], int] | None = None,
) -> None:
  """Reports a resume and drops the metrics rows the run will log again.

  A run killed between two checkpoints logged steps the resumed run trains
  again: dropping them keeps one `metrics.jsonl` row per metric and step.
  Call it once the trainer restored, before anything is logged; nothing for
  a fresh run (`step` 0).

  Args:
    step: the update step the trainer restored.
    recipe: the recipe's name, which starts the line.
    relogged_from: `name -> step`: the first step at which the resumed run
      logs metric `name` again (default below).
  """
  if not step:
    return
  # Tunix's trainers (and OPD's decode evaluation) evaluate at the restored
  # step before training on; every other metric starts at the next step.
  first = relogged_from or (lambda name: step if "/eval/" in name else step + 1)
  dropped = 0
  if files.is_writer():
    dropped = metrics.drop_records(
        workdir,
        lambda r: r["step"] is not None and r["step"] >= first(r["name"]),
    )
  note = ""
  if dropped:
    note = f"; {dropped} metrics rows to be logged again dropped"
  print(
      f"{recipe}: resumed from step {step} (workdir {workdir}){note}.",
      flush=True,
  )
