# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `bench_rl`: one GRPO step, phase by phase, diffusion vs AR.

Builds tunix_bd's diffusion GRPO learner and Tunix's own AR GRPO learner on
the same prompts, group size, batch and token budget
(`benchmarks.grpo_step`); `benchmarks.step_phases` times their phases
(rollout, reference, old, train, sync) round after round, interleaved.
Prints each phase's median and ratio, and the diffusion replay's layout;
writes them as JSON to `output` when set, else to `bench_rl.json` under
`workdir`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import ml_collections
import numpy as np

from benchmarks import grpo_step
from benchmarks import step_phases
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import settings as generate_settings
from tunix_bd.rl import prompt_stream
from tunix_bd.rl import settings as settings_lib
from tunix_bd.run import stage as stage_lib


@dataclasses.dataclass(frozen=True)
class BenchRlConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: grpo_step.GrpoStepModelSettings
  data: data_settings.Data
  rollout: generate_settings.GrpoRollout
  grpo: settings_lib.GrpoSettings
  bench: grpo_step.GrpoStepSettings
  mesh: mesh_lib.MeshSettings


def validate(
    config: ml_collections.ConfigDict,
) -> stage_lib.Stage[BenchRlConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  stage = stage_lib.Stage(config, BenchRlConfig, writes="output_or_workdir")
  stage.settings.model.check_model_files()
  return stage


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """Times both GRPO steps; prints the table and writes it as JSON."""
  stage = validate(config)
  settings = stage.settings
  rollout, grpo, bench = settings.rollout, settings.grpo, settings.bench
  data = settings.data
  tokenizer, ar_tokenizer, bd = grpo_step.tokenizers_and_bd(
      settings.model, data.chat_template
  )
  train_set = dataset_lib.train_conversations(data, "bench_rl")
  prompts = prompt_stream.render(
      tokenizer, train_set, rollout.max_prompt_length, data.chat_options
  )
  item = next(
      prompt_stream.items(
          prompts, batch_size=bench.num_prompts, seed=config.seed
      )
  )
  # Tunix's learner repeats each prompt G times before rolling out.
  item = {k: np.repeat(v, grpo.num_generations) for k, v in item.items()}

  stage.hold()  # One run at a time: another would skew the timings.
  mesh = mesh_lib.make_mesh(settings.mesh)
  with mesh_lib.tunix_context(mesh):
    diffusion, trace = grpo_step.diffusion_arm(stage, tokenizer, bd, item, mesh)
    arms = {
        "diffusion": diffusion,
        "ar": grpo_step.ar_arm(stage, ar_tokenizer, item, mesh),
    }
    seconds = step_phases.time_rounds(
        arms, warmup=bench.warmup_rounds, repeats=bench.repeats
    )

  summary = step_phases.summarize(seconds, arms)
  summary["replay"] = grpo_step.replay_layout(trace, bd.block_size)
  caption = (
      f"GRPO step benchmark: {bench.num_prompts} prompts x"
      f" G={grpo.num_generations}, {rollout.max_new_tokens} new tokens,"
      f" block size {bd.block_size}, threshold {rollout.threshold:g},"
      f" T={rollout.temperature:g}; median of {bench.repeats} interleaved"
      f" rounds on {jax.device_count()} {jax.devices()[0].platform}"
      " device(s)"
  )
  print(
      step_phases.format_table(summary, caption)
      + "\n"
      + grpo_step.replay_line(summary["replay"])
  )
  report_lib.write_json(stage.output_path("bench_rl.json"), summary)
  return summary
