# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Content digests of Hugging Face checkpoint directories.

Runs identify the checkpoints they read by what those hold, not by where
they lie. A digest is SHA-256 over four parts, each a SHA-256 itself:

  config     the bytes of `config.json`.
  weights    every tensor of every `*.safetensors` file (the files Tunix's
             loader reads), in tensor-name order: its name, dtype, shape and
             byte length, then its data bytes. Sharding, header order and
             padding and `__metadata__` are layout, not content: the same
             tensors saved whole or sharded give one digest.
  tokenizer  the name, length and bytes of each tokenizer file present
             (`TOKENIZER_FILES`); None if there is none.
  settings   the bytes of `block_diffusion.json`; None for an AR checkpoint.

Nothing is loaded as an array and only the standard library is imported:
tensor bytes stream through `hashlib` in chunks read into one reused
buffer, so a multi-GB shard costs one pass of disk reads in constant memory.

  python -m tunix_bd.models.checkpoint_digest DIRECTORY  # prints the digest
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import struct
import sys
from typing import BinaryIO

CONFIG_FILE = "config.json"
SETTINGS_FILE = "block_diffusion.json"
TOKENIZER_FILES = (
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "merges.txt",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
)
DEFAULT_CHUNK_BYTES = 8 << 20
# The safetensors format caps headers at 100 MB; a larger length means the
# file is not safetensors, and reading it would allocate that much.
_MAX_HEADER_BYTES = 100_000_000


@dataclasses.dataclass(frozen=True)
class CheckpointDigest:
  """The SHA-256 hex digests of a checkpoint's parts (see the module doc)."""

  config: str
  weights: str
  tokenizer: str | None
  settings: str | None

  def parts(self) -> dict[str, str | None]:
    """`{part: digest}`: what a run fingerprint records, part by part."""
    return dataclasses.asdict(self)

  @property
  def digest(self) -> str:
    """One SHA-256 hex digest of all parts: the checkpoint's identity."""
    parts = json.dumps(self.parts(), sort_keys=True).encode()
    return hashlib.sha256(parts).hexdigest()


def _buffer(chunk_bytes: int) -> memoryview:
  """The one buffer, of `chunk_bytes` bytes, that files are read into."""
  if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int):
    raise ValueError(f"chunk_bytes must be an int, got {chunk_bytes!r}.")
  if chunk_bytes < 1:
    raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}.")
  return memoryview(bytearray(chunk_bytes))


def _stream(digest, buffer, f: BinaryIO, offset: int, length: int, name: str):
  """Feeds `length` bytes of `f` from `offset` to `digest` through `buffer`."""
  f.seek(offset)
  while length:
    read = f.readinto(buffer[: min(length, len(buffer))])
    if not read:
      raise ValueError(f"{name} ended {length} bytes early.")
    digest.update(buffer[:read])
    length -= read


def _frame(digest, *fields) -> None:
  """Hashes a record's fields unambiguously (one JSON line)."""
  digest.update(json.dumps(fields).encode() + b"\n")


def _read_header(path: str) -> tuple[dict, int]:
  """`({tensor: header entry}, data start)` of one safetensors file."""
  with open(path, "rb") as f:
    size = os.fstat(f.fileno()).st_size
    prefix = f.read(8)
    header_bytes = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else 0
    if not 0 < header_bytes <= min(_MAX_HEADER_BYTES, size - 8):
      raise ValueError(f"{path} is not a safetensors file (bad header length).")
    try:
      header = json.loads(f.read(header_bytes))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise ValueError(
          f"{path} has a safetensors header that is not JSON: {e}"
      ) from e
  if not isinstance(header, dict):
    raise ValueError(f"{path} has a safetensors header that is not a dict.")
  header.pop("__metadata__", None)
  data_start = 8 + header_bytes
  for name, entry in header.items():
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        and 0 <= offsets[0] <= offsets[1]
        and isinstance(entry.get("dtype"), str)
        and isinstance(entry.get("shape"), list)
    ):
      raise ValueError(
          f"{path}: tensor {name!r} has an invalid header entry {entry!r}."
      )
    if offsets[1] > size - data_start:
      raise ValueError(
          f"{path} is truncated: tensor {name!r} ends at byte {offsets[1]} of"
          f" a data section of {size - data_start} bytes; copy or download"
          " it again."
      )
  return header, data_start


def weight_files(directory: str) -> list[str]:
  """The `*.safetensors` files of `directory` (those Tunix's loader reads)."""
  return sorted(n for n in os.listdir(directory) if n.endswith(".safetensors"))


def check_weight_files(directory: str) -> None:
  """Fails closed, naming the file, on a `*.safetensors` file of
  `directory` cut short (an interrupted copy)."""
  for name in weight_files(directory):
    _read_header(os.path.join(directory, name))


def tensor_headers(directory: str) -> dict[str, tuple[str, int, dict]]:
  """`{tensor: (file name, data start, header entry)}` of the weight files,
  from their headers (an entry has `dtype` as safetensors names it,
  `"BF16"`, ..., `shape` and `data_offsets`); a ValueError for no weight
  file, a bad or truncated one, or a tensor in two files."""
  names = weight_files(directory)
  if not names:
    raise ValueError(f"No *.safetensors weight files in {directory}.")
  tensors = {}
  for name in names:
    header, data_start = _read_header(os.path.join(directory, name))
    for key, entry in header.items():
      if key in tensors:
        raise ValueError(
            f"Tensor {key!r} is in both {tensors[key][0]} and {name}."
        )
      tensors[key] = (name, data_start, entry)
  return tensors


def _weights_digest(directory: str, buffer: memoryview) -> str:
  tensors = tensor_headers(directory)
  digest = hashlib.sha256()
  with contextlib.ExitStack() as stack:
    opened = {}
    for key in sorted(tensors):
      name, data_start, entry = tensors[key]
      if name not in opened:
        path = os.path.join(directory, name)
        opened[name] = stack.enter_context(open(path, "rb"))
      begin, end = entry["data_offsets"]
      _frame(digest, key, entry["dtype"], entry["shape"], end - begin)
      _stream(
          digest, buffer, opened[name], data_start + begin, end - begin, name
      )
  return digest.hexdigest()


def _files_digest(
    directory: str, names: tuple[str, ...], buffer: memoryview
) -> str | None:
  """The digest of the files of `names` present, or None if none is."""
  paths = {n: os.path.join(directory, n) for n in sorted(names)}
  present = [n for n, path in paths.items() if os.path.isfile(path)]
  if not present:
    return None
  digest = hashlib.sha256()
  for name in present:
    with open(paths[name], "rb") as f:
      size = os.fstat(f.fileno()).st_size
      if len(names) > 1:  # A part of one file is just its bytes.
        _frame(digest, name, size)
      _stream(digest, buffer, f, 0, size, name)
  return digest.hexdigest()


def config_path(directory: str) -> str:
  """The `config.json` of a checkpoint directory, which must both exist."""
  if not os.path.isdir(directory):
    raise ValueError(f"Checkpoint directory {directory} does not exist.")
  path = os.path.join(directory, CONFIG_FILE)
  if not os.path.isfile(path):
    raise ValueError(
        f"{directory} is not a Hugging Face checkpoint directory:"
        f" {CONFIG_FILE} not found."
    )
  return path


def digest_file(path: str | os.PathLike[str]) -> str:
  """The SHA-256 hex digest of a file's bytes, streamed in chunks."""
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise ValueError(f"{path} is not a file.")
  directory, name = os.path.split(path)
  return _files_digest(directory, (name,), _buffer(DEFAULT_CHUNK_BYTES))


def digest_checkpoint(
    directory: str | os.PathLike[str],
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> CheckpointDigest:
  """Digests a checkpoint directory without loading it (see the module doc),
  reading at most `chunk_bytes` at a time; a ValueError for a missing
  directory or `config.json`, or as `tensor_headers`."""
  directory = os.fspath(directory)
  config_path(directory)
  buffer = _buffer(chunk_bytes)
  return CheckpointDigest(
      config=_files_digest(directory, (CONFIG_FILE,), buffer),
      weights=_weights_digest(directory, buffer),
      tokenizer=_files_digest(directory, TOKENIZER_FILES, buffer),
      settings=_files_digest(directory, (SETTINGS_FILE,), buffer),
  )


def main(argv: list[str]) -> int:
  """The command line: each directory's digest; one error line, status 1."""
  if not argv:
    print(
        "usage: python -m tunix_bd.models.checkpoint_digest DIRECTORY ...",
        file=sys.stderr,
    )
    return 2
  for argument in argv:
    try:
      print(f"{digest_checkpoint(argument).digest}  {argument}")
    except (OSError, ValueError) as e:
      print(f"checkpoint_digest: error: {e}", file=sys.stderr)
      return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
