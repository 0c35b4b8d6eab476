# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `generate`: decode prompts with a block-diffusion model.

Decodes the eval split or a `{"prompt", "answer"}` JSONL with a converted
checkpoint (or an SDAR or Fast-dLLM v2 directory) into
`evaluation.completions`' lines and summary.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import ml_collections

from tunix_bd import mesh as mesh_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.evaluation import completions
from tunix_bd.generate import prompt_batches
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import converted
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import sections
from tunix_bd.run import stage as stage_lib


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outputs:
  """The recipe's top-level keys of what it writes: `output` (a file;
  "": `completions.jsonl` under `workdir`) and whether `verify_replay`
  reports the largest |replayed - recorded| log-prob."""

  SECTION: ClassVar[str] = ""  # Top-level keys (`run.stage.Stage`).

  output: str = ""
  verify_replay: bool = False

  def __post_init__(self):
    if not isinstance(self.output, str):
      raise ValueError(f"output must be a path or '', got {self.output!r}.")
    if not isinstance(self.verify_replay, bool):
      raise ValueError(
          f"verify_replay must be True or False, got {self.verify_replay!r}."
      )


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  decode: settings_lib.DecodeSettings
  model: sections.DecodeModel
  bd: settings_lib.CheckpointBdSettings
  data: data_settings.PromptData
  mesh: mesh_lib.MeshSettings
  outputs: Outputs


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[GenerateConfig]:
  """Every section, checked before any model is read (the checkpoint's
  directory last: a bad setting is reported even without a model)."""
  stage = stage_lib.Stage(config, GenerateConfig, writes="output_or_workdir")
  output = stage.settings.outputs.output
  if output:  # Only an earlier output of this recipe is replaced.
    completions.check_output(output)
  return stage


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Decodes, writes completions and returns the summary figures."""
  stage = validate(config)
  settings = stage.settings
  decode, checkpoint = settings.decode, settings.model.checkpoint
  # Prompts are rendered as in training (the export's record).
  opened = converted.open_converted(
      checkpoint,
      chat_template=settings.data.chat_template,
      options=settings.data.chat_options,
      key="model.checkpoint",
  )
  bd, tokenizer, chat_options = opened.bd, opened.tokenizer, opened.chat_options
  settings.bd.check(bd)
  records, source = dataset_lib.prompt_records(settings.data)
  prompts = [
      chat.encode_prompt(
          tokenizer,
          r["messages"],
          chat_options,
          f"row {i} (0-based) of {source}",
      )
      for i, r in enumerate(records)
  ]
  if decode.max_prompt_length:
    settings_lib.check_prompt_lengths(
        prompts,
        decode.max_prompt_length,
        key="decode.max_prompt_length",
        where=source,
    )
  longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
  hf_checkpoint.check_positions(
      hf_checkpoint.read_config(checkpoint),
      len(prompts[longest]),
      decode.max_new_tokens,
      what=(
          f"row {longest} (0-based) of {source} ({len(prompts[longest])}"
          f" tokens) plus decode.max_new_tokens={decode.max_new_tokens}"
      ),
      model_key="model.checkpoint",
  )
  denoise_config = decode.denoise_config(tokenizer, len(prompts[longest]))
  stage.hold()  # Every check passed: one run decodes into the workdir.
  mesh = mesh_lib.make_mesh(settings.mesh)
  model = opened.load(mesh, settings.model).model
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
        verify_replay=settings.outputs.verify_replay,
    )
  output = stage.output_path(completions.COMPLETIONS_FILE)
  completions.write_completions(output, records, result)
  summary, text = completions.summarize(
      records, result, decode, bd.block_size, output
  )
  print(text)
  return summary
