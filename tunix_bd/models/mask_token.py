# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Provisioning the block-diffusion mask token for a model and tokenizer.

`provision_mask_token` reuses a reserved id or adds a token and one
embedding row (`resize_vocab`), as docs/design.md "Mask token" says; the
new row is the mean of the old ones (as Hugging Face's `mean_resizing`),
so its output column scores every input with the mean of the old logits.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.core import rng
from tunix_bd.data import tokenizer as tokenizer_lib

DEFAULT_MASK_TOKEN = "<|mask|>"


def _check_id_allowed(
    tokenizer: Any, mask_id: int, vocab_size: int, stop_ids: Iterable[int]
) -> None:
  if not 0 <= mask_id < vocab_size:
    raise ValueError(
        f"mask token id {mask_id} is outside the model vocabulary"
        f" [0, {vocab_size})."
    )
  names = ("pad_token_id", "eos_token_id", "bos_token_id", "unk_token_id")
  specials = {name: getattr(tokenizer, name, None) for name in names}
  specials.update({f"stop_ids[{i}]": s for i, s in enumerate(stop_ids)})
  for name, special in specials.items():
    if special is not None and int(special) == mask_id:
      raise ValueError(
          f"mask token id {mask_id} equals the tokenizer's {name}; use an"
          " unused reserved token."
      )


def resolve_reserved_mask_id(
    tokenizer: Any,
    mask_token: str | int,
    *,
    vocab_size: int,
    stop_ids: Iterable[int] = (),
) -> int:
  """The id of `mask_token` (an added token's string or an id, maybe past
  the tokenizer), checked (a ValueError otherwise) to be a reserved id that
  is never generated: not out of range, a special or stop id, nor an
  ordinary text token."""
  if isinstance(mask_token, str):
    added = tokenizer.get_added_vocab()
    if mask_token not in added:
      raise ValueError(
          f"mask token {mask_token!r} is not a special/added token of the"
          " tokenizer; add it with provision_mask_token."
      )
    mask_id = int(added[mask_token])
  elif isinstance(mask_token, (int, np.integer)) and not isinstance(
      mask_token, bool
  ):
    mask_id = int(mask_token)
  else:
    raise ValueError(f"mask_token must be a str or int, got {mask_token!r}.")
  _check_id_allowed(tokenizer, mask_id, vocab_size, stop_ids)
  reserved = set(tokenizer.get_added_vocab().values())
  reserved.update(tokenizer.all_special_ids)
  if mask_id < len(tokenizer) and mask_id not in reserved:
    # Plain text tokenizes into it, so real tokens would read as masks.
    raise ValueError(
        f"mask token id {mask_id}"
        f" ({tokenizer.convert_ids_to_tokens(mask_id)!r}) is an ordinary text"
        " token; use a special/reserved token or an unused row."
    )
  return mask_id


def register_mask_token(tokenizer: Any, mask_id: int) -> str | None:
  """Names the token of `mask_id` (already a special or reserved one) the
  tokenizer's `mask_token`, in place; returns its string, or None for an id
  past the tokenizer's last (an embedding row no string encodes to)."""
  if mask_id >= len(tokenizer):
    return None
  token = tokenizer.convert_ids_to_tokens(mask_id)
  if token not in tokenizer.get_added_vocab():
    # Making it special would change how plain text tokenizes.
    raise ValueError(
        f"mask token id {mask_id} ({token!r}) is an ordinary text token; it"
        " cannot be the tokenizer's mask_token."
    )
  tokenizer.add_special_tokens({"mask_token": token})
  if tokenizer.mask_token_id != mask_id:
    raise ValueError(
        f"the tokenizer gave its mask_token {token!r} id"
        f" {tokenizer.mask_token_id}, expected {mask_id}."
    )
  return token


def resize_vocab(model: Any) -> tuple[Any, Any]:
  """`(new_model, new_config)`: a Tunix Qwen3, Qwen2 or Llama 3 (no LoRA)
  with one more embedding row (and untied lm_head column), id `vocab_size`,
  the mean of the others (as HF's `mean_resizing`); other weights copied
  bit for bit, `model` unchanged. Reshard a sharded model afterwards."""
  if not isinstance(model, tuple(families.MODEL_CLASSES.values())):
    raise ValueError(
        "resize_vocab supports Tunix Qwen3, Qwen2 and Llama 3 models, got"
        f" {type(model).__name__}."
    )
  model_class = families.model_class(model.config)
  config = dataclasses.replace(
      model.config, vocab_size=model.config.vocab_size + 1
  )
  params = nnx.state(model).to_pure_dict()

  def mean_rows(w: jax.Array, axis: int) -> jax.Array:
    mean = jnp.mean(w.astype(jnp.float32), axis=axis, keepdims=True)
    return jnp.concatenate([w, mean.astype(w.dtype)], axis=axis)

  embedding = params["embedder"]["input_embedding"]
  params["embedder"]["input_embedding"] = mean_rows(embedding, axis=0)
  if not config.use_tied_embedding:
    params["lm_head"]["w"] = mean_rows(params["lm_head"]["w"], axis=1)

  abstract = nnx.eval_shape(lambda: model_class(config, rngs=rng.rngs(0)))
  graphdef, state = nnx.split(abstract)
  want = jax.tree_util.tree_flatten_with_path(state.to_pure_dict())[0]
  got = jax.tree_util.tree_flatten_with_path(params)[0]
  want_shapes = {jax.tree_util.keystr(p): v.shape for p, v in want}
  got_shapes = {jax.tree_util.keystr(p): v.shape for p, v in got}
  if want_shapes != got_shapes:
    diff = sorted(set(want_shapes.items()) ^ set(got_shapes.items()))
    raise ValueError(
        "the model's state does not match a plain model of the new vocab"
        f" size (LoRA or other extra state?): differing entries {diff[:5]}."
    )
  nnx.replace_by_pure_dict(state, params)
  return nnx.merge(graphdef, state), config


def provision_mask_token(
    model: Any,
    tokenizer: Any,
    token: str = DEFAULT_MASK_TOKEN,
    *,
    stop_ids: Iterable[int] = (),
) -> tuple[Any, Any, int]:
  """`(model, model_config, mask_id)` with `token` the tokenizer's
  `mask_token`: its own, else added (in place) at an unused embedding row
  past the tokenizer or at a row the model gains (`resize_vocab`; the model
  is the input when none was added)."""
  vocab_size = model.config.vocab_size
  if token in tokenizer.get_vocab():
    mask_id = resolve_reserved_mask_id(
        tokenizer, token, vocab_size=vocab_size, stop_ids=stop_ids
    )
    register_mask_token(tokenizer, mask_id)
    return model, model.config, mask_id
  new_id = len(tokenizer)
  if new_id > vocab_size:
    raise ValueError(
        f"the tokenizer has {new_id} ids but the model only {vocab_size}"
        " embedding rows."
    )
  # A new row only where the model has none past the tokenizer.
  model, config = (
      resize_vocab(model) if new_id == vocab_size else (model, model.config)
  )
  tokenizer.add_special_tokens({"mask_token": token})
  mask_id = tokenizer.convert_tokens_to_ids(token)
  if mask_id != new_id:
    raise ValueError(
        f"the tokenizer gave {token!r} id {mask_id}, expected {new_id}."
    )
  _check_id_allowed(tokenizer, mask_id, config.vocab_size, stop_ids)
  return model, config, mask_id


def embedded_tokenizer_and_bd(
    **bd_settings: Any,
) -> tuple[Any, bd_config_lib.BlockDiffusionConfig]:
  """The embedded tokenizer and `BlockDiffusionConfig(**bd_settings)` on its
  mask token, for random policies (smoke variants)."""
  tokenizer = tokenizer_lib.build_char_tokenizer()
  mask_id = resolve_reserved_mask_id(
      tokenizer, tokenizer_lib.MASK_TOKEN, vocab_size=tokenizer_lib.VOCAB_SIZE
  )
  return tokenizer, bd_config_lib.BlockDiffusionConfig(
      mask_token_id=mask_id, **bd_settings
  )
