# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `generate`: decode prompts with a block-diffusion model.

Loads a converted checkpoint (HF directory + `block_diffusion.json`, or an
SDAR or Fast-dLLM v2 directory as it is: `models.bd_formats`), decodes
the embedded task's eval split (or a user's `{"prompt", "answer"}` JSONL) by
parallel block denoising, writes one JSON line per prompt (completion,
correctness, forwards, tokens per forward) and prints exact match, tokens per
forward and tokens/s (`evaluation.completions`). `verify_replay=True` also
replays every trace and reports the largest |replayed - recorded| log-prob.
"""

from __future__ import annotations

import ml_collections

from tunix_bd import mesh as mesh_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.evaluation import completions
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import bd_formats
from tunix_bd.run import models


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Decodes, writes completions and returns the summary figures."""
  # Every setting is checked before the model is read.
  settings = completions.validate(config)
  decode, checkpoint = settings.decode, settings.model.checkpoint
  mesh = mesh_lib.from_section(config.mesh)
  bd = bd_formats.load_settings(checkpoint)
  settings.bd.check(bd)
  tokenizer = bd_formats.load_tokenizer(
      checkpoint, settings.data.chat_template, key="model.checkpoint"
  )
  # Prompts are rendered as in training (the export's record).
  chat_options = chat.trained_options(
      bd_formats.load_extra(checkpoint, chat.SETTINGS_KEY),
      settings.data.chat_options,
  )
  records, source = dataset_lib.prompt_records(config.data)
  prompts = [
      chat.encode_prompt(tokenizer, r["messages"], chat_options)
      for r in records
  ]
  if decode.max_prompt_length:
    settings_lib.check_prompt_lengths(
        prompts,
        decode.max_prompt_length,
        key="decode.max_prompt_length",
        where=source,
    )
  denoise_config = decode.denoise_config(
      tokenizer, max(len(p) for p in prompts)
  )
  model = models.load_checkpoint(checkpoint, mesh, settings.model.precision)
  with mesh_lib.tunix_context(mesh):
    result = prompt_batches.decode_prompts(
        model,
        tokenizer,
        prompts,
        bd=bd,
        config=denoise_config,
        batch_size=decode.batch_size,
        seeds=decode.seed,
        warm_up=True,
        verify_replay=settings.verify_replay,
    )
  completions.write_completions(settings.output, records, result)
  summary, text = completions.summarize(
      records, result, settings, bd.block_size
  )
  print(text)
  return summary
