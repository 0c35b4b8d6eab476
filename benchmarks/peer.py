# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`bench_decode`'s peer column: a reference block decoder on our weights.

The peer is Fast-dLLM v2's own decoder (`generate` in the `modeling.py` of
the Hugging Face model repository Efficient-Large-Model/Fast_dLLM_v2_7B,
with its block cache) on the checkpoint our side decodes, a directory in
that format, which tunix_bd reads through `bd_formats`. Their code needs
torch and transformers 4.5x, so it runs in a subprocess under the
interpreter of the `peer` config section (`peer.python`), importing their
modeling files from `peer.code`; `peer_driver.py`, run by that interpreter,
is the small program that loads and decodes, and this module starts it,
sends it batches of prompt ids and reads its JSON lines back as
`speed.BatchOutput`s, so `speed.measure` times it interleaved with our
methods like any other. Its time is measured here, around each exchange
(the driver's own time is kept too: `seconds_inside`).

Its settings are ours: the checkpoint's block size and mask id, the
benchmark's threshold, our tokenizer's EOS as `stop_token`, greedy
(`temperature=0`). `peer.small_block_size` 0 (the default) makes their
sub-block the whole block, where their commit rule is ours (every masked
position above the threshold, else the most confident), up to one
difference (docs/formats.md, "Against tunix_bd's decoder"): they commit a
block's first token as the argmax of the previous block's last logit
before denoising it, so tokens may differ after the first block.

SDAR is not a peer: its `block_diffusion_generate` has no greedy mode and
decodes one prompt, so it refuses (docs/formats.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import tempfile
import time
from typing import Any, Sequence

import numpy as np

from tunix_bd import config_utils
from tunix_bd.evaluation import speed
from tunix_bd.models import bd_formats

DRIVER = os.path.join(os.path.dirname(__file__), "peer_driver.py")
# The modeling files the driver imports, per format the peer decodes.
CODE_FILES = {bd_formats.FAST_DLLM_V2: ("modeling.py", "configuration.py")}


@dataclasses.dataclass(frozen=True)
class PeerSettings:
  """The `peer` config section.

  Attributes:
    python: an interpreter with torch and transformers 4.53.1
      (tools/bd_formats/README.md); empty: no peer column.
    code: a directory holding the format's modeling files (Fast-dLLM v2:
      `modeling.py` and `configuration.py` of Fast_dLLM_v2_7B).
    small_block_size: their sub-block; 0: the block size.
    use_block_cache: their sub-block cache (their fastest decoding).
  """

  python: str = ""
  code: str = ""
  small_block_size: int = 0
  use_block_cache: bool = True

  @property
  def enabled(self) -> bool:
    return bool(self.python)


def from_section(section: Any) -> PeerSettings:
  """The `peer` section, checked before any compute.

  Raises:
    ValueError: naming the key, for an interpreter that is not an
      executable file, a code directory that does not exist, or a bad
      sub-block size.
  """
  settings = config_utils.from_section(PeerSettings, section, "peer")
  if not settings.enabled:
    if settings.code:
      raise ValueError(
          f"peer.code={settings.code!r} is set but peer.python is empty:"
          " set both to add the peer column, neither to leave it out."
      )
    return settings
  python = settings.python
  if not (os.path.isfile(python) and os.access(python, os.X_OK)):
    raise ValueError(
        f"peer.python={python!r} is not an executable file: give an"
        " interpreter with torch and transformers 4.53.1"
        " (tools/bd_formats/README.md)."
    )
  if not os.path.isdir(settings.code):
    raise ValueError(
        f"peer.code={settings.code!r} is not a directory: give one holding"
        " the format's modeling files (Fast-dLLM v2: modeling.py and"
        " configuration.py of Efficient-Large-Model/Fast_dLLM_v2_7B)."
    )
  config_utils.check_int("peer.small_block_size", settings.small_block_size, 0)
  if not isinstance(settings.use_block_cache, bool):
    raise ValueError(
        "peer.use_block_cache must be a bool, got"
        f" {settings.use_block_cache!r}."
    )
  return settings


def check_checkpoint(
    settings: PeerSettings, checkpoint: str, key: str
) -> tuple[str, ...]:
  """The modeling files the peer needs for `checkpoint`, all checked.

  Args:
    settings: an enabled `PeerSettings`.
    checkpoint: the directory both sides decode.
    key: the config key naming it, for errors.

  Raises:
    ValueError: naming the key, for a checkpoint not in a format the peer
      decodes, modeling files missing from `peer.code`, or a sub-block
      size that does not divide the checkpoint's block size.
  """
  found = bd_formats.read_dir(checkpoint)
  if found is None or found[0].name not in CODE_FILES:
    got = "no format" if found is None else found[0].name
    raise ValueError(
        f"{key}={checkpoint!r} is in {got}; the peer decodes"
        f" {sorted(CODE_FILES)} checkpoints (config.json model_type"
        f" {bd_formats.FORMATS[bd_formats.FAST_DLLM_V2].model_type!r}). SDAR's"
        " block_diffusion_generate has no greedy mode and takes one prompt,"
        " so it is no peer; set peer.python='' to run without one."
    )
  files = CODE_FILES[found[0].name]
  missing = [
      f for f in files if not os.path.isfile(os.path.join(settings.code, f))
  ]
  if missing:
    raise ValueError(
        f"peer.code={settings.code!r} lacks {missing}: the modeling files of"
        " the Hugging Face model repository"
        " Efficient-Large-Model/Fast_dLLM_v2_7B."
    )
  block_size = bd_formats.load_settings(checkpoint, key).block_size
  small = settings.small_block_size
  if small and block_size % small:
    raise ValueError(
        f"peer.small_block_size={small} must divide {key}'s block size"
        f" {block_size}."
    )
  return files


@dataclasses.dataclass(frozen=True)
class Reply:
  """The driver's answer to one batch.

  Attributes:
    tokens: per prompt, every token their decoder appended (untruncated).
    forwards: `[batch]` model forwards per prompt.
    seconds: the batch's decoding time inside the driver.
  """

  tokens: list[list[int]]
  forwards: np.ndarray
  seconds: float


def _parse(line: str, what: str) -> dict[str, Any]:
  try:
    message = json.loads(line)
  except json.JSONDecodeError:
    message = None
  if not isinstance(message, dict):
    raise RuntimeError(f"peer driver: expected {what}, got {line[:200]!r}.")
  if "error" in message:
    raise RuntimeError(f"peer driver failed: {message['error']}")
  return message


def parse_ready(line: str) -> dict[str, Any]:
  """The driver's first line: what it loaded."""
  message = _parse(line, "its ready line")
  if not isinstance(message.get("ready"), dict):
    raise RuntimeError(f"peer driver: no ready line, got {line[:200]!r}.")
  return message["ready"]


def parse_reply(line: str, num_prompts: int) -> Reply:
  """One batch's answer, checked to hold a row per prompt."""
  message = _parse(line, "a reply")
  tokens, forwards = message.get("tokens"), message.get("forwards")
  if (
      not isinstance(tokens, list)
      or not isinstance(forwards, list)
      or len(tokens) != num_prompts
      or len(forwards) != num_prompts
      or not isinstance(message.get("seconds"), (int, float))
  ):
    raise RuntimeError(
        f"peer driver: expected {num_prompts} rows of tokens and forwards"
        f" and seconds, got {line[:200]!r}."
    )
  return Reply(
      tokens=[[int(t) for t in row] for row in tokens],
      forwards=np.asarray(forwards, np.int64),
      seconds=float(message["seconds"]),
  )


def completion(tokens: Sequence[int], stop_id: int, budget: int) -> list[int]:
  """What our decoder would return of them: before the first stop, at most
  `budget` tokens."""
  tokens = list(tokens)
  if stop_id in tokens:
    tokens = tokens[: tokens.index(stop_id)]
  return tokens[:budget]


def agreement(
    peer_tokens: Sequence[Sequence[int]], our_tokens: Sequence[Sequence[int]]
) -> dict[str, float]:
  """How far the peer's completions agree with ours, row by row.

  Returns:
    `same_tokens`: the fraction of rows with identical completions;
    `common_prefix`: the mean over rows of the agreeing prefix's length
    over the length of ours.
  """
  same, prefix = [], []
  for theirs, ours in zip(peer_tokens, our_tokens, strict=True):
    theirs, ours = list(theirs), list(ours)
    n = 0
    while n < min(len(theirs), len(ours)) and theirs[n] == ours[n]:
      n += 1
    same.append(theirs == ours)
    prefix.append(n / max(len(ours), 1))
  return {
      "same_tokens": float(np.mean(same)),
      "common_prefix": float(np.mean(prefix)),
  }


class Peer:
  """The driver subprocess for one checkpoint and its decoding settings.

  A context manager; `decoder` gives the `speed.Decoder` that times it.
  """

  def __init__(
      self,
      settings: PeerSettings,
      checkpoint: str,
      *,
      block_size: int,
      mask_id: int,
      threshold: float,
      max_new_tokens: int,
      stop_id: int,
      key: str,
  ):
    files = check_checkpoint(settings, checkpoint, key)
    self.stop_id, self.max_new_tokens = stop_id, max_new_tokens
    # Seconds of every exchange, outside (ours) and inside (the driver's).
    self.seconds_outside = self.seconds_inside = 0.0
    command = [
        settings.python,
        DRIVER,
        f"--checkpoint={checkpoint}",
        f"--code={settings.code}",
        f"--code_files={','.join(files)}",
        f"--block_size={block_size}",
        f"--small_block_size={settings.small_block_size or block_size}",
        f"--threshold={threshold!r}",
        f"--max_new_tokens={max_new_tokens}",
        f"--mask_id={mask_id}",
        f"--stop_token={stop_id}",
        f"--use_block_cache={int(settings.use_block_cache)}",
    ]
    # Our PYTHONPATH would put tunix_bd's transformers before theirs.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # OpenMP threads that spin while they wait make torch's small CPU
    # matmuls 10-100x slower on a machine with more runnable processes than
    # cores; sleeping waits keep the peer at its best (unless set already).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    self._stderr = tempfile.TemporaryFile(mode="w+")
    self._process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=self._stderr,
        text=True,
        env=env,
    )
    try:
      self.ready = self._read(parse_ready)
    except RuntimeError:
      self.close()
      raise

  def _read(self, parse):
    line = self._process.stdout.readline()
    try:
      return parse(line)
    except RuntimeError as e:
      self._stderr.seek(0)
      tail = self._stderr.read()[-2000:]
      raise RuntimeError(f"{e}\npeer driver stderr:\n{tail}") from None

  def decode(self, prompts: Sequence[Sequence[int]]) -> Reply:
    """Their decoder's raw output for a batch of prompt ids."""
    request = {"prompts": [[int(t) for t in p] for p in prompts]}
    start = time.perf_counter()
    self._process.stdin.write(json.dumps(request) + "\n")
    self._process.stdin.flush()
    reply = self._read(lambda line: parse_reply(line, len(prompts)))
    self.seconds_outside += time.perf_counter() - start
    self.seconds_inside += reply.seconds
    return reply

  @property
  def exchange_overhead(self) -> float:
    """The share of the peer's measured time spent outside its decoder
    (the pipe, JSON); the peer's tokens/s carry it."""
    return 1.0 - self.seconds_inside / max(self.seconds_outside, 1e-9)

  def decoder(self, tokenizer: Any) -> speed.Decoder:
    """A `speed.Decoder` of prompt id lists, completions as ours."""

    def decode(batch: Sequence[Sequence[int]]) -> speed.BatchOutput:
      reply = self.decode(batch)
      rows = [
          completion(t, self.stop_id, self.max_new_tokens) for t in reply.tokens
      ]
      return speed.BatchOutput(
          texts=[tokenizer.decode(r) for r in rows],
          num_tokens=np.asarray([len(r) for r in rows]),
          num_forwards=reply.forwards,
          tokens=rows,
      )

    return decode

  def close(self) -> None:
    if self._process.poll() is None:
      self._process.stdin.close()
      self._process.wait(timeout=60)
    self._stderr.close()

  def __enter__(self) -> Peer:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
