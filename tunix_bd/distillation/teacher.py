# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The causal teacher of on-policy distillation, on the student's vocabulary.

Any supported AR model at block size 1 with the shifted alignment, its
logits padded to the student's width with `MASKED_LOGIT` (docs/design.md,
"OPD").
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.core import diffusion_lm
from tunix_bd.core import families
from tunix_bd.core import special_ids
from tunix_bd.models import bd_formats


def ar_config(mask_token_id: int) -> bd_config_lib.BlockDiffusionConfig:
  """The teacher's logits contract: one-token blocks, one causal forward."""
  return dataclasses.replace(
      bd_config_lib.BlockDiffusionConfig.autoregressive(mask_token_id),
      layout=bd_config_lib.SINGLE_CANVAS,
  )


def check_teacher_model(teacher_config: Any, student_vocab_size: int) -> None:
  """Fails closed on a teacher that cannot score for this student: an
  unsupported family, flash attention, a vocabulary larger than the
  student's."""
  families.family(teacher_config)
  if getattr(teacher_config, "use_flash_attention", False):
    raise ValueError(
        "the teacher has use_flash_attention=True, whose kernel ignores the"
        " attention mask passed in; set use_flash_attention=False."
    )
  if teacher_config.vocab_size > student_vocab_size:
    raise ValueError(
        f"the teacher's vocabulary ({teacher_config.vocab_size} ids) is larger"
        f" than the student's ({student_vocab_size}); on-policy distillation"
        " needs the student's tokenizer (the teacher's plus at most a mask"
        " token)."
    )


def check_compatible(
    teacher_dir: str,
    teacher_tokenizer: Any,
    student_tokenizer: Any,
    *,
    key: str = "model.teacher",
) -> None:
  """Fails closed on a block-diffusion `teacher_dir` (block_diffusion.json,
  SDAR or Fast-dLLM v2) or tokenizers that differ other than by the mask
  token SFT added and the pad an SDAR import moves off a stop id. `key`
  names `teacher_dir` in errors.
  """
  if os.path.isfile(os.path.join(teacher_dir, bd_config_lib.SETTINGS_FILE)):
    raise ValueError(
        f"{key}={teacher_dir!r} is a block-diffusion checkpoint (it"
        f" has {bd_config_lib.SETTINGS_FILE}); the teacher must be a causal"
        " AR model, e.g. the one the student was converted from."
    )
  found = bd_formats.read_dir(teacher_dir)
  if found is not None:
    raise ValueError(
        f"{key}={teacher_dir!r} is a block-diffusion checkpoint in"
        f" {found[0].name} format (model_type {found[0].model_type!r}); the"
        " teacher must be a causal AR model, e.g. the Qwen3 or Qwen2"
        " checkpoint the student was converted from."
    )
  teacher_vocab = teacher_tokenizer.get_vocab()
  student_vocab = student_tokenizer.get_vocab()
  extra = sorted(set(student_vocab) - set(teacher_vocab))
  same_ids = all(student_vocab.get(k) == v for k, v in teacher_vocab.items())
  # An SDAR student's import may have moved its pad off a stop id that is
  # the teacher's pad (`bd_formats.adapt_tokenizer`): one more added token.
  moved_pad = (
      student_tokenizer.pad_token == bd_formats.PAD_TOKEN
      and bd_formats.PAD_TOKEN in extra
      and teacher_tokenizer.pad_token_id
      in special_ids.checkpoint_stop_ids(student_tokenizer)
  )
  same = (
      same_ids
      and len(extra) <= 1 + moved_pad
      and teacher_tokenizer.chat_template == student_tokenizer.chat_template
      and teacher_tokenizer.eos_token_id == student_tokenizer.eos_token_id
      and (
          moved_pad
          or teacher_tokenizer.pad_token_id == student_tokenizer.pad_token_id
      )
  )
  if not same:
    raise ValueError(
        f"the tokenizers differ: {key}={teacher_dir!r} (the AR model)"
        f" {fingerprint_lib.tokenizer_digest(teacher_tokenizer)}, its"
        " block-diffusion student"
        f" {fingerprint_lib.tokenizer_digest(student_tokenizer)}; they must"
        " be identical (the student may only add its mask token, and the"
        f" pad {bd_formats.PAD_TOKEN!r} its SDAR import gave it)."
    )


def aligned_logits(
    teacher: Any,
    tokens: jax.Array,
    positions: jax.Array,
    segment_ids: jax.Array,
    *,
    vocab_size: int,
    mask_token_id: int,
) -> jax.Array:
  """Target-aligned causal logits on the student's vocabulary.

  Args:
    tokens: int `[batch, length]` clean sequences.
    positions: int `[batch, length]` logical positions.
    segment_ids: int `[batch, length]`, 0 = pad.
    vocab_size: the student's vocabulary size, >= the teacher's.
    mask_token_id: the student's mask id; its column is `MASKED_LOGIT`.

  Returns:
    float32 `[batch, length, vocab_size]`: index i holds the teacher's raw
    logits at the token before i in its segment (0 where none); columns
    past the teacher's vocabulary and the mask column are `MASKED_LOGIT`.
  """

  def padded(tokens, positions, cache, attention_mask):
    # No `config`: `diffusion_logits_fn` checks the mask id against the
    # padded width (the model itself is checked by `check_teacher_model`).
    raw, cache = teacher(tokens, positions, cache, attention_mask)
    extra = vocab_size - raw.shape[-1]
    raw = jnp.pad(
        raw.astype(jnp.float32),
        ((0, 0), (0, 0), (0, extra)),
        constant_values=diffusion_lm.MASKED_LOGIT,
    )
    return raw, cache

  return diffusion_lm.diffusion_logits_fn(
      padded,
      tokens,
      positions,
      segment_ids,
      config=ar_config(mask_token_id),
  )
