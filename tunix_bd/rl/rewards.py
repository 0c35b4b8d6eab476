# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Reward functions for GRPO, in Tunix's signature.

Tunix calls each as `fn(prompts=..., completions=..., **kwargs)` with the
`B * G` rendered prompts and completions cut at the first stop token,
`mode`, every other dataset key repeated per generation (`answer`, ...),
and, from tunix_bd's learner, `num_forwards` and `num_completion_tokens` per
row. It sums them per row and logs each one's mean as
`rewards/<fn.__name__>` (so each carries a readable name).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from typing import Any, Callable

import numpy as np

from tunix_bd.data import scoring

RewardFn = Callable[..., list[float]]


# `reward.speed_gate` values: "" (a penalty on every row) or "exact".
SPEED_GATE_EXACT = "exact"
SPEED_GATES = ("", SPEED_GATE_EXACT)


def _column(kwargs: dict[str, Any], key: str, num: int, who: str) -> list:
  """Dataset key `key` of the rows, checked to hold one value per row."""
  if key not in kwargs:
    raise ValueError(
        f"reward {who!r} needs the {key!r} key (got keys {sorted(kwargs)});"
        f" its data must provide {key!r} for every prompt."
    )
  values = list(np.asarray(kwargs[key]).reshape(-1))
  if len(values) != num:
    raise ValueError(
        f"reward {who!r}: {len(values)} {key!r} values for {num} completions."
    )
  return values


def _against_answer(
    name: str, score: Callable[[str, str], Any], weight: float = 1.0
) -> RewardFn:
  """`weight * score(completion, answer)` per row, as a reward called `name`."""

  def reward(prompts, completions, **kwargs) -> list[float]:
    del prompts
    answers = _column(kwargs, "answer", len(completions), name)
    return [
        weight * float(score(c, str(a))) for c, a in zip(completions, answers)
    ]

  reward.__name__ = reward.__qualname__ = name
  return reward


# Unweighted (`scoring`): 1.0 where a completion answers its row's `answer`;
# the fraction of its characters right.
exact_match = _against_answer("exact_match", scoring.exact_match)
partial_credit = _against_answer("partial_credit", scoring.char_accuracy)


def _speed(weight: float, cap: float, gate: str) -> RewardFn:
  """The speed term: ungated, `-weight * min(forwards / tokens, cap)` for
  every row; gated on `exact`, `weight * (1 - min(forwards / tokens, cap) /
  cap)` for exactly correct rows and 0 for others (wrong but fast never
  pays).
  """

  def speed(prompts, completions, **kwargs) -> list[float]:
    num = len(completions)
    forwards = _column(kwargs, "num_forwards", num, "speed")
    tokens = _column(kwargs, "num_completion_tokens", num, "speed")
    per_row = [
        min(float(f) / max(int(t), 1), cap) for f, t in zip(forwards, tokens)
    ]
    if gate != SPEED_GATE_EXACT:
      return [-weight * r for r in per_row]
    correct = exact_match(prompts, completions, **kwargs)
    return [weight * c * (1.0 - r / cap) for c, r in zip(correct, per_row)]

  return speed


def resolve_function(path: str, key: str) -> RewardFn:
  """The reward function at `package.module:function` (the part after the
  colon may be dotted) or dotted path, checked to take Tunix's call; errors
  name `key`."""
  if not isinstance(path, str) or not path.strip():
    raise ValueError(f"{key} must be a non-empty import path, got {path!r}.")
  if ":" in path:
    module_name, _, attribute = path.partition(":")
  else:
    module_name, _, attribute = path.rpartition(".")
  if not module_name or not attribute:
    raise ValueError(
        f"{key}={path!r} must be 'package.module:function' or"
        " 'package.module.function'."
    )
  try:
    target = importlib.import_module(module_name)
  except ImportError as e:
    raise ValueError(
        f"{key}={path!r}: cannot import module {module_name!r} ({e})."
    ) from None
  for part in attribute.split("."):
    if not hasattr(target, part):
      raise ValueError(f"{key}={path!r}: {module_name!r} has no {attribute!r}.")
    target = getattr(target, part)
  if not callable(target):
    raise ValueError(f"{key}={path!r} is not callable.")
  try:
    signature = inspect.signature(target)
  except (TypeError, ValueError):
    return target  # Not introspectable (a builtin): the first call will tell.
  if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
    raise ValueError(
        f"{key}={path!r} must accept **kwargs: Tunix passes every dataset key"
        " and `mode` by keyword."
    )
  try:
    signature.bind(prompts=[], completions=[])
  except TypeError as e:
    raise ValueError(
        f"{key}={path!r} cannot be called as fn(prompts=..., completions=...,"
        f" **kwargs): {e}."
    ) from None
  return target


def _checked(fn: RewardFn, key: str) -> RewardFn:
  """`fn` failing closed, naming `key`, unless it returns one finite per row
  (Tunix sums rewards with `nansum`: a NaN would silently count as 0)."""

  @functools.wraps(fn)
  def reward(prompts, completions, **kwargs) -> list[float]:
    values = fn(prompts=prompts, completions=completions, **kwargs)
    try:
      values = [float(v) for v in values]
    except (TypeError, ValueError):
      raise ValueError(
          f"{key} ({fn.__name__}) must return numbers, got {values!r}."
      ) from None
    if len(values) != len(completions) or not all(map(math.isfinite, values)):
      raise ValueError(
          f"{key} ({fn.__name__}) must return {len(completions)} finite"
          f" numbers, one per completion, got {values!r}."
      )
    return values

  return reward


def reward_fns(settings: Any) -> list[RewardFn]:
  """The reward functions of the `reward` section, in its order: terms of
  weight 0 left out (their keys need not exist), then user functions, each
  checked on every call. Names must differ: Tunix logs each function's
  reward by name."""
  fns = [
      _against_answer(name, score, weight)
      for name, score, weight in (
          ("exact_match", scoring.exact_match, settings.exact),
          ("partial_credit", scoring.char_accuracy, settings.partial),
      )
      if weight
  ]
  if settings.speed_weight:
    fns.append(
        _speed(settings.speed_weight, settings.speed_cap, settings.speed_gate)
    )
  for i, path in enumerate(settings.functions):
    key = f"reward.functions[{i}]"
    fns.append(_checked(resolve_function(path, key), key))
  if not fns:
    raise ValueError(
        "the reward is empty: set reward.exact, reward.partial or"
        " reward.speed_weight to a non-zero weight, or list reward.functions."
    )
  names = [fn.__name__ for fn in fns]
  repeated = sorted({n for n in names if names.count(n) > 1})
  if repeated:
    raise ValueError(
        f"reward functions {repeated} share a name; Tunix logs each"
        " function's reward by name (`rewards/<name>`), so names must differ."
    )
  return fns
