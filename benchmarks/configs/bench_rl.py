# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark one GRPO step, phase by phase: diffusion vs Tunix's AR GRPO.

On the embedded default, after the quickstart (whose converted model,
`runs/quickstart/sft/export`, is the diffusion policy and whose AR teacher,
`runs/quickstart/ar_pretrain/export`, is the AR policy):

  python -m benchmarks bench_rl.py

Times rollout, reference log-probs, old log-probs, the train step (live
log-probs + backward + optimizer update) and the weight sync of both, on
the same prompts with the same group size and token budget, interleaved in
one run; prints the per-phase median seconds and their ratios, and writes
them as JSON to `output` (`--config.output=PATH`) or, left empty, to
`bench_rl.json` under `workdir`. Variants: `default`; `smoke` (alias
`tiny`), two random tiny models and no earlier run.
"""

import ml_collections

from benchmarks import grpo_step
from tunix_bd import config_files
from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.models import from_scratch
from tunix_bd.rl import settings

_VARIANTS = ("default", "smoke", "tiny")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown bench_rl variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_rl"
  config.workdir = "runs/bench_rl"
  config.seed = 0
  # A path to write the report as JSON; empty: `bench_rl.json` under
  # `workdir`.
  config.output = ""
  # Each section takes its defaults from its settings dataclass; this config
  # states what it changes. model: the block-diffusion policy (a converted
  # model) and the AR policy (Tunix's GRPO), each its own KL reference;
  # `random_init`: two random policies of the `scratch` shape.
  config.model = config_utils.to_section(grpo_step.GrpoStepModelSettings)
  # The prompts: the first `bench.num_prompts` of the seeded prompt stream.
  config.data = config_utils.to_section(
      data_settings.Data, num_train=256, num_eval=8
  )
  # `grpo.py`'s own; the AR rollout uses the same token budget, prompt
  # length and temperature (Tunix's `vanilla` engine, no vocabulary filter).
  config.rollout = config_files.get_config("grpo").rollout
  # Both learners' GRPO settings, as in `grpo.py`. `num_iterations=2` makes
  # both compute old log-probs, as any run with more than one update per
  # rollout does.
  config.grpo = config_utils.to_section(settings.GrpoSettings, num_iterations=2)
  # The batch, the learning rate (0: fixed policies) and the rounds timed.
  config.bench = config_utils.to_section(grpo_step.GrpoStepSettings)
  config.mesh = config_utils.to_section(mesh.MeshSettings)

  if variant in ("smoke", "tiny"):
    config.workdir = "runs/bench_rl_smoke"
    config.model.random_init = True
    config.model.scratch.update(from_scratch.TINY_SHAPE)
    config.model.scratch_bd.block_size = 4
    config.data.update(num_train=16, num_eval=4, max_len=3)
    config.rollout.update(max_new_tokens=8, max_prompt_length=32)
    config.grpo.num_generations = 4
    config.bench.update(num_prompts=2, warmup_rounds=1, repeats=2)
  return config
