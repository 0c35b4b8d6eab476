# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Reads users' local JSONL datasets, failing closed on the first bad line.

Accepted records, one JSON object per line (blank lines are skipped):

* chat: `{"messages": [{"role": ..., "content": ...}, ...]}` whose last
  message is the assistant turn to supervise;
* completion: `{"prompt": str, "completion": str}`, read as a user turn and
  an assistant turn;
* RL prompts (`kind="rl"`): `{"prompt": str | messages, "answer": str}`;
* held-out prompts (`kind="held_out"`): a record of either form, an RL
  record read as its prompt turns and an assistant turn holding the answer.

Every error names the file and the 1-based line number.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from tunix_bd.data import chat

Kind = Literal["sft", "rl", "held_out"]


def _sft_messages(record: dict[str, Any], where: str) -> list[dict[str, str]]:
  if "messages" in record:
    messages = record["messages"]
  elif "prompt" in record or "completion" in record:
    for key in ("prompt", "completion"):
      if not isinstance(record.get(key), str):
        raise ValueError(f"{where}: field {key!r} must be a string.")
    if not record["completion"].strip():
      raise ValueError(f"{where}: field 'completion' is empty.")
    messages = [
        {"role": "user", "content": record["prompt"]},
        {"role": "assistant", "content": record["completion"]},
    ]
  else:
    raise ValueError(
        f"{where}: expected a 'messages' list or 'prompt' and 'completion' "
        f"fields, got keys {sorted(record)}."
    )
  chat.validate_messages(messages, where)
  return [{"role": m["role"], "content": m["content"]} for m in messages]


def _rl_record(record: dict[str, Any], where: str) -> dict[str, Any]:
  for key in ("prompt", "answer"):
    if key not in record:
      raise ValueError(f"{where}: missing field {key!r}.")
  if not isinstance(record["answer"], str):
    raise ValueError(f"{where}: field 'answer' must be a string.")
  prompt = record["prompt"]
  if isinstance(prompt, str):
    if not prompt.strip():
      raise ValueError(f"{where}: field 'prompt' is empty.")
    prompt = [{"role": "user", "content": prompt}]
  elif not isinstance(prompt, list) or not prompt:
    raise ValueError(
        f"{where}: field 'prompt' must be a string or a list of messages."
    )
  else:
    for i, message in enumerate(prompt):
      if not (
          isinstance(message, dict)
          and message.get("role") in ("system", "user", "assistant")
          and isinstance(message.get("content"), str)
      ):
        raise ValueError(
            f"{where}: prompt message {i} must be an object with a 'role' "
            "('system', 'user' or 'assistant') and a string 'content'."
        )
  return {"messages": prompt, "answer": record["answer"]}


def read_jsonl(path: str, kind: Kind = "sft") -> list[dict[str, Any]]:
  """Reads and validates a JSONL dataset of `kind` (see the module doc):
  `[{"messages": [...]}]`, for `"rl"` with an `"answer"` beside its prompt
  turns."""
  return [record for _, record in read_jsonl_records(path, kind)]


def read_jsonl_records(
    path: str, kind: Kind = "sft"
) -> list[tuple[str, dict[str, Any]]]:
  """`read_jsonl`'s records, each with the `path:line` later checks name it
  by (blank lines make it differ from the record index)."""
  if kind not in ("sft", "rl", "held_out"):
    raise ValueError(f"kind must be 'sft', 'rl' or 'held_out', got {kind!r}.")
  if os.path.isdir(path):
    raise ValueError(f"dataset file {path!r} is a directory, not a JSONL file.")
  if not os.path.isfile(path):
    raise ValueError(f"dataset file not found: {path!r}.")
  records = []
  # Bytes, decoded line by line: a binary file fails naming its line.
  with open(path, "rb") as f:
    for line_number, raw in enumerate(f, start=1):
      where = f"{path}:{line_number}"
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(
            f"{where}: not UTF-8 text (byte {raw[e.start]:#04x} at column"
            f" {e.start + 1}); is it a JSONL file?"
        ) from None
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON ({e.msg}).") from None
      if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object.")
      if kind == "held_out" and "answer" in record:
        rl = _rl_record(record, where)
        answer = {"role": "assistant", "content": rl["answer"]}
        records.append((where, {"messages": [*rl["messages"], answer]}))
      elif kind in ("sft", "held_out"):
        records.append((where, {"messages": _sft_messages(record, where)}))
      else:
        records.append((where, _rl_record(record, where)))
  if not records:
    raise ValueError(f"{path}: the dataset has no records.")
  return records
