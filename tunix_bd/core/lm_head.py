# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Model calls' rows and their output head, in vocabulary chunks.

A model call returns `Rows`: target-aligned final hidden rows and the head
that makes them logits, or logits already. `dense_logits` and `token_stats`
consume them; `token_stats` reads a target's log-prob and the argmax
`chunk` columns at a time (docs/design.md "Output head and precision"). A
zero hidden row gives logits 0 (the heads have no bias), so the target
alignment can be applied to hidden rows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax
import jax
import jax.numpy as jnp
from tunix_bd import compat
from tunix_bd import config_utils
from tunix_bd.core import families
from tunix_bd.core import scoring
from tunix_bd.core.scoring import MASKED_LOGIT

# Vocabulary columns per chunk by default: a 152k vocabulary in 19 chunks,
# whose `[rows, chunk]` float32 logits are 32 KiB per row.
DEFAULT_CHUNK = 8192


@flax.struct.dataclass
class Head:
  """A decoder's output head: logits = `hidden @ weight` in `dtype`.

  Attributes:
    weight: `[vocab, embed]` (`vocab_axis` 0, a tied embedding) or `[embed,
      vocab]` (`vocab_axis` 1, an `lm_head`).
    vocab_axis: static, the weight's vocabulary axis.
    dtype: static compute dtype of the product (the model's), or None for
      the weight's own.
    excluded: static ids whose logit is `MASKED_LOGIT` (the mask token).
  """

  weight: jax.Array
  vocab_axis: int = flax.struct.field(pytree_node=False)
  dtype: Any = flax.struct.field(pytree_node=False)
  excluded: tuple[int, ...] = flax.struct.field(pytree_node=False)

  @property
  def vocab_size(self) -> int:
    return self.weight.shape[self.vocab_axis]


def model_head(model: Any, mask_token_id: int | None = None) -> Head:
  """The output head of a Tunix decoder of a supported family.

  Qwen3 and Qwen2 multiply by the tied embedding (`embedder.decode`) or by
  `lm_head`, both in `config.dtype`; Llama 3 likewise, in the weight's
  dtype. The product is what `model(...)` returns as logits, cast to
  float32 (`lm_head_test` checks it on every family).

  `mask_token_id` (or None) is excluded: its logit is `MASKED_LOGIT`. A
  head with LoRA adapters is refused (qwix adds them to the product, which
  the chunks here would leave out).
  """
  tied, owner = _head_owner(model)
  if _has_lora(owner):
    raise ValueError(
        "the output head has LoRA adapters (lora.module_path matches"
        " 'lm_head' or 'embedder'), which chunked logits cannot apply; keep"
        " LoRA off the head or set model.logits_chunk=0."
    )
  weight = owner.input_embedding if tied else owner.w
  head = Head(
      weight=weight[...],
      vocab_axis=0 if tied else 1,
      dtype=getattr(model.config, "dtype", None),
      excluded=() if mask_token_id is None else (int(mask_token_id),),
  )
  for token in head.excluded:
    if not 0 <= token < head.vocab_size:
      raise ValueError(
          f"mask_token_id={token} is outside the model's logits vocabulary"
          f" of size {head.vocab_size}."
      )
  return head


def _head_owner(model: Any) -> tuple[bool, Any]:
  """`(tied, the module holding the head's weight)`."""
  config = model.config
  name = families.family(config)
  tied = config.weight_tying if name == "llama3" else config.use_tied_embedding
  return tied, model.embedder if tied else model.lm_head


def _has_lora(owner: Any) -> bool:
  return any(key.endswith("_lora_a") for key in vars(owner))


def split_head(model: Any, mask_token_id: int | None = None) -> Head | None:
  """The head a model call splits off its rows, or None (rows are logits).

  `model_head`'s for a Tunix decoder that returns its hidden states
  (`compat.hidden_states_flag`) and has no LoRA on its head; None for any
  other callable, whose own logits are then the rows.
  """
  if getattr(model, "config", None) is None:
    return None
  if compat.hidden_states_flag(model) is None or _has_lora(
      _head_owner(model)[1]
  ):
    return None
  return model_head(model, mask_token_id)


@flax.struct.dataclass
class Rows:
  """A model call's target-aligned rows and the head that makes them logits.

  Attributes:
    values: `[..., embed]` final hidden rows in the model's compute dtype
      (with a head), or float32 `[..., vocab]` logits, the mask column at
      `MASKED_LOGIT` (head None).
    head: the `Head`, or None.
  """

  values: jax.Array
  head: Head | None = None

  @property
  def vocab_size(self) -> int:
    if self.head is None:
      return self.values.shape[-1]
    return self.head.vocab_size

  def map(self, fn) -> Rows:
    """The same rows with `fn` (a gather, a slice) applied to `values`."""
    return self.replace(values=fn(self.values))


def as_rows(out: Any) -> Rows:
  """A model call's output as `Rows`: logits (an injected call's) as they
  are."""
  if isinstance(out, Rows):
    return out
  return Rows(jnp.asarray(out, jnp.float32))


def chunk_logits(rows: Rows, start, size: int) -> jax.Array:
  """float32 `[..., size]` logits of columns `[start, start + size)`.

  `start` may be traced; excluded ids read `MASKED_LOGIT`.
  """
  if rows.head is None:
    return jax.lax.dynamic_slice_in_dim(
        rows.values, start, size, axis=-1
    ).astype(jnp.float32)
  head, hidden = rows.head, rows.values
  dtype = head.dtype or head.weight.dtype
  weight = jax.lax.dynamic_slice_in_dim(
      head.weight, start, size, axis=head.vocab_axis
  ).astype(dtype)
  hidden = hidden.astype(dtype)
  if head.vocab_axis == 0:
    logits = jnp.dot(hidden, weight.T)
  else:
    logits = jnp.einsum("...d,dv->...v", hidden, weight)
  logits = logits.astype(jnp.float32)
  columns = start + jnp.arange(size)
  for token in head.excluded:
    logits = jnp.where(columns == token, MASKED_LOGIT, logits)
  return logits


def dense_logits(rows: Rows) -> jax.Array:
  """float32 `[..., vocab]` logits of the rows, the whole product."""
  return chunk_logits(rows, 0, rows.vocab_size)


@dataclasses.dataclass(frozen=True)
class Chunks:
  """Static chunking of a vocabulary: `count` chunks of `size` columns.

  Chunk i covers the columns from `i * size`; the last one starts at
  `vocab - size` instead (no padded copy of the weight), and its columns
  before `i * size`, already seen, are marked invalid.
  """

  vocab: int
  size: int

  @property
  def count(self) -> int:
    return -(-self.vocab // self.size)

  def start(self, i):
    return jnp.minimum(i * self.size, self.vocab - self.size)

  def valid(self, i):
    return self.start(i) + jnp.arange(self.size) >= i * self.size


def check_chunk(logits_chunk: Any) -> int | None:
  """`model.logits_chunk` checked: None (dense logits) or an int >= 1."""
  if logits_chunk is None:
    return None
  return config_utils.check_int("model.logits_chunk", logits_chunk, 1)


def chunks_of(vocab: int, chunk: int) -> Chunks:
  """`vocab` columns in chunks of `chunk` (checked; capped at `vocab`)."""
  return Chunks(
      vocab, min(config_utils.check_int("model.logits_chunk", chunk, 1), vocab)
  )


def scan_chunks(body, init, chunks: Chunks):
  """`lax.scan` of `body(carry, i)` over the chunks, rematerialized.

  Under differentiation each chunk's forward is recomputed in the backward
  pass, so only the carry (a few values per row) is kept per chunk.
  """
  step = jax.checkpoint(lambda carry, i: (body(carry, i), None))
  carry, _ = jax.lax.scan(step, init, jnp.arange(chunks.count))
  return carry


def online_logsumexp(m, s, scaled):
  """One chunk of an online logsumexp: `(max, sum exp(x - max))`.

  The running max only stabilizes, so it is held constant under
  differentiation; the gradient of `m + log s` is then exactly the softmax.
  """
  m_new = jax.lax.stop_gradient(jnp.maximum(m, jnp.max(scaled, axis=-1)))
  s = s * jnp.exp(m - m_new) + jnp.sum(jnp.exp(scaled - m_new[..., None]), -1)
  return m_new, s


def running_argmax(best, index, logits, start):
  """Running argmax; the first of equal values wins, as in `jnp.argmax`."""
  value = jnp.max(logits, axis=-1)
  where = start + jnp.argmax(logits, axis=-1).astype(jnp.int32)
  better = value > best
  return jnp.where(better, value, best), jnp.where(better, where, index)


def token_stats(
    rows: Rows,
    targets: jax.Array,
    *,
    temperature: Any = 1.0,
    chunk: int | None = DEFAULT_CHUNK,
) -> tuple[jax.Array, jax.Array]:
  """Log-probs of `targets` and the argmax, `chunk` columns at a time.

  `(log_probs, argmax)`, float32 and int32 `[...]` of `[..., width]` rows
  and int `[...]` targets: with `chunk` None, `scoring.token_log_probs(
  dense_logits(rows), targets, temperature)` and `jnp.argmax(dense_logits(
  rows), -1)`; with an int (capped at the vocabulary), the same to float
  rounding, gradients included, without the dense logits. The argmax (of
  the untempered logits) carries no gradient.
  """
  if targets.shape != rows.values.shape[:-1]:
    raise ValueError(
        f"targets have shape {targets.shape}, the rows"
        f" {rows.values.shape[:-1]}."
    )
  if chunk is None:
    logits = dense_logits(rows)
    log_probs = scoring.token_log_probs(logits, targets, temperature)
    return log_probs, jnp.argmax(logits, axis=-1)
  chunks = chunks_of(rows.vocab_size, chunk)
  shape = targets.shape
  targets = targets.astype(jnp.int32)

  def body(carry, i):
    m, s, picked, best, index = carry
    start, valid = chunks.start(i), chunks.valid(i)
    logits = chunk_logits(rows, start, chunks.size)
    logits = jnp.where(valid, logits, MASKED_LOGIT)
    scaled = scoring.scale_logits(logits, temperature)
    m, s = online_logsumexp(m, s, scaled)
    columns = start + jnp.arange(chunks.size)
    is_target = valid & (columns == targets[..., None])
    picked += jnp.sum(jnp.where(is_target, scaled, 0.0), axis=-1)
    best, index = running_argmax(
        best, index, jax.lax.stop_gradient(logits), start
    )
    return m, s, picked, best, index

  init = (
      jnp.full(shape, MASKED_LOGIT, jnp.float32),
      jnp.zeros(shape, jnp.float32),
      jnp.zeros(shape, jnp.float32),
      jnp.full(shape, -jnp.inf, jnp.float32),
      jnp.zeros(shape, jnp.int32),
  )
  m, s, picked, _, index = scan_chunks(body, init, chunks)
  return picked - (m + jnp.log(s)), index
