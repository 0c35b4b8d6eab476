# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one validator of the special token ids every stage relies on.

The mask token, the pad id and the stop ids must be distinct, or stop
weights, trace checks and EOS fills would read one id as two things: `check`
holds those rules for every stage, and `tokenizer_stop_ids` composes the
stop list (the EOS, the checkpoint's other stop ids riding on its tokenizer,
then `rollout.extra_stop_ids`) the same way for every decoder (docs/design.md
"Hugging Face checkpoints in and out").
"""

from __future__ import annotations

from typing import Any, Sequence

EXTRA_STOP_IDS_KEY = "rollout.extra_stop_ids"
# The tokenizer attribute holding its checkpoint's stop ids besides the EOS.
CHECKPOINT_STOP_IDS_ATTR = "tunix_bd_checkpoint_stop_ids"


def check_distinct(key: str, ids: Any) -> tuple[int, ...]:
  """`ids` as a tuple of ints >= 0, none repeated; errors name `key`."""
  if (
      isinstance(ids, (str, bytes))
      or not isinstance(ids, Sequence)
      or not all(
          not isinstance(i, bool) and hasattr(i, "__index__") and int(i) >= 0
          for i in ids
      )
  ):
    raise ValueError(f"{key} must be token ids (ints >= 0), got {ids!r}.")
  ids = tuple(int(i) for i in ids)
  if len(set(ids)) != len(ids):
    raise ValueError(f"{key} has duplicates: {ids!r}.")
  return ids


def checkpoint_stop_ids(tokenizer: Any) -> tuple[int, ...]:
  """The stop ids besides its EOS that the tokenizer's checkpoint names.

  Empty but for a tokenizer whose import set them
  (`models.bd_formats.adapt_tokenizer`).
  """
  return tuple(getattr(tokenizer, CHECKPOINT_STOP_IDS_ATTR, ()))


def tokenizer_stop_ids(
    tokenizer: Any, extra_stop_ids: Sequence[int] | None = ()
) -> tuple[int, ...]:
  """A stage's stop ids: `ordered_stop_ids`, the extra ids checked.

  A tokenizer without an EOS leaves the extra ids to stop alone; errors
  name `rollout.extra_stop_ids`. None: the caller has no such setting (a
  tokenizer without an EOS then cannot stop a row).
  """
  key, eos_id = EXTRA_STOP_IDS_KEY, tokenizer.eos_token_id
  if extra_stop_ids is None and eos_id is None:
    raise ValueError(
        "the tokenizer has no EOS token, so no completion could stop: set"
        " `eos_token` in its tokenizer_config.json."
    )
  extra = check_distinct(key, extra_stop_ids or ())
  if eos_id is None and not extra:
    raise ValueError(
        f"the tokenizer has no EOS token and {key} is empty: set {key} to"
        " the ids that end a completion."
    )
  if eos_id is not None and int(eos_id) in extra:
    raise ValueError(
        f"{key}={extra!r} repeats the tokenizer's EOS id {int(eos_id)}, which"
        " is always a stop id."
    )
  return ordered_stop_ids(tokenizer, extra)


def ordered_stop_ids(
    tokenizer: Any, extra_stop_ids: Sequence[int] = ()
) -> tuple[int, ...]:
  """The tokenizer's EOS (if any), its checkpoint's other stop ids, then
  `extra_stop_ids`, each once; unchecked (`tokenizer_stop_ids` checks)."""
  ids = (
      tokenizer.eos_token_id,
      *checkpoint_stop_ids(tokenizer),
      *map(int, extra_stop_ids),
  )
  return tuple(dict.fromkeys(i for i in ids if i is not None))


def check(
    *,
    mask_token_id: int,
    pad_id: int | None,
    stop_ids: Sequence[int],
    eos_id: int | None = None,
    vocab_size: int | None = None,
) -> None:
  """Fails closed unless the special ids can be told apart.

  Args:
    pad_id: the pad id of completions, or None (a tokenizer without one).
    stop_ids: the ids that end a completion (may be empty where only the
      mask id is checked, e.g. a model's contract without a tokenizer).
    eos_id: the tokenizer's EOS id when it is not among `stop_ids`.
    vocab_size: the model's vocabulary; every id must be inside it.
  """
  stop_ids = check_distinct("stop_ids", stop_ids)
  if pad_id is not None and int(pad_id) in stop_ids:
    raise ValueError(
        f"the pad id {pad_id} cannot be a stop id {stop_ids}: pads mark"
        " never-generated slots, so a stop id must be a token the model"
        " generates (e.g. EOS)."
    )
  specials = {"pad_id": pad_id, "eos_id": eos_id}
  specials.update({f"stop_ids[{i}]": s for i, s in enumerate(stop_ids)})
  for name, special in specials.items():
    if special is not None and int(special) == int(mask_token_id):
      raise ValueError(
          f"mask_token_id={mask_token_id} equals {name}; the mask token must"
          " be an id that is never a real token."
      )
  if vocab_size is None:
    return
  if not 0 <= int(mask_token_id) < vocab_size:
    raise ValueError(
        f"mask_token_id={mask_token_id} is outside the model vocabulary"
        f" [0, {vocab_size})."
    )
  ids = stop_ids + tuple(int(s) for s in (pad_id, eos_id) if s is not None)
  outside = sorted({i for i in ids if i >= vocab_size})
  if outside:
    raise ValueError(
        f"stop_ids / pad_id {outside} are outside the model vocabulary"
        f" [0, {vocab_size})."
    )
