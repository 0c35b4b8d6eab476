# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `generate`: decode prompts with a block-diffusion model.

Loads a converted checkpoint (HF directory + `block_diffusion.json`, or an
SDAR or Fast-dLLM v2 directory as it is: `models.bd_formats`), decodes
the embedded task's eval split (or a user's `{"prompt", "answer"}` JSONL) by
parallel block denoising, writes one JSON line per prompt (completion,
correctness, forwards, tokens per forward) and prints exact match, tokens per
forward and tokens/s. `verify_replay=True` also replays every trace and
reports the largest |replayed - recorded| log-prob.
"""

from __future__ import annotations

import json
import os

import ml_collections
import numpy as np

from tunix_bd import config_utils
from tunix_bd import files
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import scoring
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import bd_formats
from tunix_bd.run import models
from tunix_bd.run import sections
from tunix_bd.run import workdir as workdir_lib


def _write_completions(path: str, records, result) -> None:
  lines = []
  for r, completion, n, tpf in zip(
      records, result.texts, result.num_forwards, result.tokens_per_forward
  ):
    row = {
        "prompt": r["messages"][-1]["content"],
        "answer": r["answer"],
        "completion": completion,
        "correct": scoring.exact_match(completion, r["answer"]),
        "task": r["task"],
        "num_forwards": int(n),
        "tokens_per_forward": round(float(tpf), 4),
    }
    lines.append(json.dumps(row) + "\n")
  files.write_text(path, "".join(lines))


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Decodes, writes completions and returns the summary figures."""
  # Every setting is checked before the model is read.
  if config.output:
    workdir_lib.check_file(config.output, "output")
  else:
    workdir_lib.check(config.workdir)
  decode = config_utils.from_section(
      settings_lib.DecodeSettings, config.decode, "decode"
  )
  model_settings = config_utils.from_section(
      sections.DecodeModelSettings, config.model, "model"
  )
  sections.check_directories(model_settings)
  checkpoint, precision = model_settings.checkpoint, model_settings.precision
  mesh = mesh_lib.from_section(config.mesh)
  bd = bd_formats.load_settings(checkpoint)
  settings_lib.check_checkpoint_settings(bd, config.bd.to_dict())
  tokenizer = bd_formats.load_tokenizer(
      checkpoint, config.data.chat_template, key="model.checkpoint"
  )
  # Prompts are rendered as in training (the export's record).
  chat_options = chat.trained_options(
      bd_formats.load_extra(checkpoint, chat.SETTINGS_KEY),
      chat.options_from_data(config.data),
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
  model = models.load_checkpoint(checkpoint, mesh, precision)
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
        verify_replay=config.verify_replay,
    )
  scores = scoring.score_by_task(
      [r["task"] for r in records], result.texts, [r["answer"] for r in records]
  )
  output = config.output or os.path.join(config.workdir, "completions.jsonl")
  _write_completions(output, records, result)
  summary = {
      "exact_match": scores["all"],
      "tokens_per_forward": float(np.mean(result.tokens_per_forward)),
      "tokens_per_s": float(
          result.num_tokens.sum() / max(result.seconds, 1e-9)
      ),
  }
  lines = [
      f"generate: {len(records)} prompts, block size {bd.block_size}, rule "
      f"{decode.rule} (threshold {decode.threshold}), temperature "
      f"{decode.temperature}, {'cached' if decode.use_cache else 'cache-free'}"
  ]
  lines += [f"  exact match {k:<8} {v:7.2%}" for k, v in scores.items()]
  lines.append(
      f"  tokens/forward {summary['tokens_per_forward']:.2f}, tokens/s "
      f"{summary['tokens_per_s']:.1f}; completions in {output}"
  )
  if result.max_replay_error is not None:
    summary["max_replay_error"] = result.max_replay_error
    lines.append(
        "  replay: max |replayed - recorded| log-prob "
        f"{result.max_replay_error:.2e}"
    )
  print("\n".join(lines))
  return summary
