# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Run fingerprints: resuming with different semantics fails closed.

What enters a fingerprint, where it is stored and how a resume compares it
is docs/design.md's "Fingerprint"; the fields come from
`tunix_bd.run.provenance.section_fields`, the one rule of every recipe.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping

import transformers

from tunix_bd import files

METADATA_KEY = "tunix_bd_fingerprint"
FILE_NAME = "fingerprint.json"
# Checkpoints and data files are recorded by the digests of their contents
# (`tunix_bd.run.provenance`), this prefix before a data file's.
DIGEST_PREFIX = "sha256:"


def _canonical(value: Any) -> Any:
  """JSON-stable form: tuples become lists, mappings get sorted keys."""
  if isinstance(value, Mapping):
    return {str(k): _canonical(v) for k, v in sorted(value.items())}
  if isinstance(value, (list, tuple)):
    return [_canonical(v) for v in value]
  if isinstance(value, (bool, int, float, str)) or value is None:
    return value
  return repr(value)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(value, dict) and value:
    flat = {}
    for key, item in value.items():
      flat.update(_flatten(item, f"{prefix}{key}."))
    return flat
  return {prefix[:-1]: value}


def fingerprint(fields: Mapping[str, Any]) -> dict[str, Any]:
  """A fingerprint: the canonical fields and their SHA-256 digest."""
  canonical = _canonical(fields)
  digest = hashlib.sha256(
      json.dumps(canonical, sort_keys=True).encode()
  ).hexdigest()
  return {"fields": canonical, "digest": digest}


def tokenizer_digest(tokenizer: transformers.PreTrainedTokenizerBase) -> str:
  """A digest of a tokenizer's vocabulary, special tokens and template."""
  content = {
      "vocab": sorted(tokenizer.get_vocab().items()),
      "special": {
          k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())
      },
      "chat_template": tokenizer.chat_template,
  }
  return hashlib.sha256(
      json.dumps(content, sort_keys=True).encode()
  ).hexdigest()[:16]


def differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
  """`{field: (recorded, current)}` for every field that differs."""
  old, new = _flatten(recorded["fields"]), _flatten(current["fields"])
  return {
      key: (old.get(key), new.get(key))
      for key in sorted(set(old) | set(new))
      if old.get(key) != new.get(key)
  }


def check(checkpoint_dir: str, current: Mapping[str, Any]) -> None:
  """Fails closed if the checkpoint root `checkpoint_dir` holds a run of
  other settings than the fingerprint `current`; writes nothing."""
  path = os.path.join(checkpoint_dir, FILE_NAME)
  if files.exists(path):
    recorded = files.read_json(
        path,
        f"it records what {checkpoint_dir}'s checkpoints were trained with:"
        " use a new workdir, or delete that directory to start this one over.",
    )
    if recorded.get("digest") != current["digest"]:
      diff = differences(recorded, current)
      recipes = diff.get("recipe")
      if recipes and None not in recipes:  # The other fields mean nothing.
        raise ValueError(
            f"cannot resume from {checkpoint_dir}: its checkpoints are a"
            f" {recipes[0]!r} run's, this is {recipes[1]!r} ({len(diff) - 1}"
            " other fields differ). Use a new workdir."
        )
      described = "".join(
          f"\n  {k}: checkpoint has {a!r}, config has {b!r}"
          for k, (a, b) in diff.items()
      )
      raise ValueError(
          f"cannot resume from {checkpoint_dir}: its fingerprint differs in"
          f" {len(diff)} field(s). Use a new workdir or restore those"
          f" settings:{described}"
      )
    return
  if any(name.isdigit() for name in files.list_dir(checkpoint_dir)):
    raise ValueError(
        f"{checkpoint_dir} holds checkpoints without a {FILE_NAME}; "
        "tunix_bd cannot tell what they mean, so it will not resume them."
    )


def record(checkpoint_dir: str, current: Mapping[str, Any]) -> None:
  """Writes a new run's `fingerprint.json` if missing, never comparing
  (`check` first)."""
  path = os.path.join(checkpoint_dir, FILE_NAME)
  if not files.exists(path):
    files.write_text(path, json.dumps(current, indent=1, sort_keys=True))
