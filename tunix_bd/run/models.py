# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one model loader of the training recipes: a checkpoint or a random model.

A `model` section (`run.sections`) names each model a run reads by key
(`checkpoint`, `student`, `teacher`, ...), or asks for a random model
(`random_init`, smoke runs); these functions turn it into a Tunix model, its
tokenizer, block-diffusion settings and chat switches, the same way in
every recipe.
"""

from __future__ import annotations

from typing import Any

import jax

from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_formats
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token
from tunix_bd.models import precision as precision_lib


def _random(settings: Any) -> bool:
  return bool(getattr(settings, "random_init", False))


def converted_tokenizer_and_bd(settings: Any, key: str, chat_template: str):
  """`(tokenizer, bd)` of converted model `model.<key>` (or the random one).

  `chat_template` (`data.chat_template`) replaces the tokenizer's template
  when set.
  """
  if _random(settings):
    tokenizer, bd = mask_token.embedded_tokenizer_and_bd(
        block_size=settings.scratch_bd.block_size,
        alignment=settings.scratch_bd.alignment,
        layout=settings.scratch_bd.layout,
    )
    tokenizer_lib.override_chat_template(tokenizer, chat_template)
    return tokenizer, bd
  path = getattr(settings, key)
  return (
      bd_formats.load_tokenizer(path, chat_template, key=f"model.{key}"),
      bd_formats.load_settings(path, f"model.{key}"),
  )


def trained_chat_options(
    settings: Any, key: str, requested: chat.ChatOptions
) -> chat.ChatOptions:
  """The chat switches converted model `model.<key>` was trained with."""
  recorded = None
  if not _random(settings):
    recorded = bd_formats.load_extra(getattr(settings, key), chat.SETTINGS_KEY)
  return chat.trained_options(recorded, requested)


def hf_files(settings: Any, key: str) -> hf_checkpoint.Source | None:
  """The HF files an export of `model.<key>` keeps; None for a random one."""
  if _random(settings):
    return None
  return hf_checkpoint.read_source(getattr(settings, key))


def load(
    settings: Any,
    key: str,
    mesh: jax.sharding.Mesh,
    *,
    seed: int = 0,
    path: str | None = None,
) -> Any:
  """The Tunix model of `model.<key>` (or `path`) at the section's precision.

  A random model (`model.random_init`) of the `model.scratch` shape is
  initialised from `seed` instead.
  """
  precision = settings.precision
  if _random(settings) and path is None:
    return from_scratch.embedded_model(settings.scratch, seed, mesh, precision)
  return load_checkpoint(path or getattr(settings, key), mesh, precision)


def load_checkpoint(
    path: str,
    mesh: jax.sharding.Mesh,
    precision: precision_lib.Precision = precision_lib.Precision(),
    *,
    decoding_only: bool = False,
) -> Any:
  """The Tunix model of checkpoint directory `path` (float32 by default).

  `decoding_only`: as for `precision.load`.
  """
  with mesh_lib.tunix_context(mesh):
    model, _ = precision_lib.load(
        path, precision, mesh=mesh, decoding_only=decoding_only
    )
  return model


# What a reference's log-probs mean: they must be the policy's for the KL.
_REFERENCE_MATCHES = ("block_size", "mask_token_id", "alignment")


def check_kl_reference(policy: str, reference: str) -> None:
  """Fails closed unless KL reference `model.reference` scores as the policy.

  An AR export (no block_diffusion.json), or other block size, mask id or
  alignment, scores a rollout's trace under another distribution: the KL
  would train towards it, silently. Checked before any compute.
  """
  mine = bd_formats.load_settings(policy, "model.checkpoint")
  theirs = bd_formats.load_settings(reference, "model.reference")
  for field in _REFERENCE_MATCHES:
    if getattr(mine, field) != getattr(theirs, field):
      raise ValueError(
          f"model.reference={reference!r} has"
          f" {field}={getattr(theirs, field)!r}, the policy"
          f" (model.checkpoint) {field}={getattr(mine, field)!r}: the KL"
          " reference must score rollouts as the policy does (e.g. set it to"
          " model.checkpoint)."
      )


def load_policy_and_reference(
    settings: Any,
    policy_mesh: jax.sharding.Mesh,
    reference_mesh: jax.sharding.Mesh,
    *,
    with_reference: bool,
    seed: int = 0,
) -> tuple[Any, Any]:
  """`(policy, reference or None)`: `model.checkpoint` and `model.reference`.

  Each is loaded on its own mesh; the reference only `with_reference` (a
  KL term, `grpo.beta > 0`).

  Raises:
    ValueError: if the two vocabularies differ (the KL needs one).
  """
  policy = load(settings, "checkpoint", policy_mesh, seed=seed)
  if not with_reference:
    return policy, None
  reference = load(settings, "reference", reference_mesh, seed=seed)
  vocab = (policy.config.vocab_size, reference.config.vocab_size)
  if vocab[0] != vocab[1]:
    raise ValueError(
        f"model.reference={settings.reference!r} has {vocab[1]} token"
        f" ids, the policy {vocab[0]}: the KL needs one vocabulary."
    )
  return policy, reference


def to_block_diffusion(model: Any, tokenizer: Any, bd: Any):
  """An AR model and tokenizer with the mask token of SFT's `bd` section.

  Args:
    tokenizer: its tokenizer; gains the mask token if it lacks it.
    bd: the `bd` section (`run.sections.BdSettings`).

  Returns:
    `(model, model_config, bd_config)`: the model (one embedding row more
    when the mask token was added), its config, and the block-diffusion
    settings on the mask token's id, checked against both.
  """
  eos_id = tokenizer.eos_token_id
  model, model_config, mask_id = mask_token.provision_mask_token(
      model, tokenizer, bd.mask_token, stop_ids=(eos_id,)
  )
  config = bd_config_lib.BlockDiffusionConfig(
      block_size=bd.block_size,
      mask_token_id=mask_id,
      alignment=bd.alignment,
      layout=bd.layout,
  )
  config.validate_for_model(
      model_config, pad_id=tokenizer.pad_token_id, eos_id=eos_id
  )
  return model, model_config, config
