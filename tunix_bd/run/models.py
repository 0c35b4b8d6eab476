# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The one model loader of the training recipes: a checkpoint or a random model.

A `model` section (`models.sections`) names each model a run reads by key
(`checkpoint`, `student`, ...) or asks for a random one (`random_init`);
these functions turn it into a Tunix model the same way in every recipe.
"""

from __future__ import annotations

from typing import Any

from flax import nnx
import jax

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import families
from tunix_bd.models import bd_formats
from tunix_bd.models import converted
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token
from tunix_bd.models import precision as precision_lib


def load(
    settings: Any, key: str, mesh: jax.sharding.Mesh, *, seed: int = 0
) -> Any:
  """The Tunix model of `model.<key>` at the section's precision, or a
  random one (`model.random_init`) of the `model.scratch` shape from `seed`.
  """
  if getattr(settings, "random_init", False):  # A `RandomInit` model.
    return from_scratch.embedded_model(settings.scratch, seed, mesh, settings)
  return load_checkpoint(getattr(settings, key), mesh, settings)


def abstract(settings: Any, key: str) -> Any:
  """`load`'s model as shapes and partition specs alone (`nnx.eval_shape`:
  nothing read but `config.json`, nothing computed), for mesh checks."""
  if getattr(settings, "random_init", False):
    config = from_scratch.embedded_config(settings.scratch)
  else:
    path = getattr(settings, key)
    config = bd_formats.model_config_from_hf(hf_checkpoint.read_config(path))
  model_class = families.model_class(config)
  return nnx.eval_shape(lambda: model_class(config, rngs=nnx.Rngs(0)))


def load_checkpoint(
    path: str,
    mesh: jax.sharding.Mesh,
    precision: precision_lib.Precision = precision_lib.Precision(),
) -> Any:
  """The Tunix model of checkpoint directory `path` (float32 by default),
  to train (a decoding model: `models.converted`)."""
  with mesh_lib.tunix_context(mesh):
    model, _ = precision_lib.load(path, precision, mesh=mesh)
  return model


def check_kl_reference(policy: str, reference: str) -> None:
  """Fails closed, before any compute, unless KL reference `model.reference`
  scores as the policy: same block size, mask id, alignment and tokenizer
  (`fingerprint.tokenizer_digest`); else the KL would silently train
  towards another distribution.
  """
  if reference == policy:
    return
  mine, theirs = (
      converted.open_converted(path, key=key)
      for path, key in (
          (policy, "model.checkpoint"),
          (reference, "model.reference"),
      )
  )
  # What a reference's log-probs mean: they must be the policy's for the KL.
  pairs = {
      field: (getattr(mine.bd, field), getattr(theirs.bd, field))
      for field in ("block_size", "mask_token_id", "alignment")
  }
  pairs["tokenizer"] = tuple(
      fingerprint_lib.tokenizer_digest(opened.tokenizer)
      for opened in (mine, theirs)
  )
  for field, (want, got) in pairs.items():
    if want != got:
      raise ValueError(
          f"model.reference={reference!r} has {field}={got!r}, the policy"
          f" (model.checkpoint) {field}={want!r}: the KL reference must score"
          " rollouts as the policy does (e.g. set it to model.checkpoint)."
      )


def load_policy_and_reference(
    settings: Any,
    policy_mesh: jax.sharding.Mesh,
    reference_mesh: jax.sharding.Mesh,
    *,
    with_reference: bool,
    seed: int = 0,
) -> tuple[Any, Any]:
  """`(policy, reference or None)`, each on its own mesh; the reference only
  `with_reference` (`grpo.beta > 0`); a ValueError unless it has the
  policy's vocabulary."""
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

  Returns `(model, model_config, bd_config)`: the model (one embedding row
  more where the tokenizer gained the mask token), its config, and the
  block-diffusion settings, checked against both.
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
