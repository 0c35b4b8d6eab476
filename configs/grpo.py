# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""GRPO (or token-level GSPO) on a block-diffusion model's own rollouts.

On the embedded default, after the quickstart (whose converted model,
`runs/quickstart/sft/export`, is the policy and the reference):

  tunix run --plugin tunix_bd grpo.py

Token-level GSPO instead of GRPO:

  tunix run --plugin tunix_bd grpo.py --config.grpo.loss_algo=gspo-token

Rollouts are parallel block denoising (threshold 0.5, temperature 1) through
Tunix's RLCluster and GRPOLearner; the policy, reference and old policy all
score each rollout by replaying its trace. The reward is exact match plus
partial credit against the data's `answer`. The run ends with `report.txt`,
`report.json` and `report.png` under `workdir`: the reward curve and
held-out greedy exact match and tokens per forward per threshold, and
sampled exact match with its paired standard error, before and after.

The held-out gain demo (`grpo.py:weak`) starts from a weakly trained SFT
model, where groups carry more signal; make it first:

  tunix run --plugin tunix_bd sft.py --config.train.max_steps=100 \
      --config.model.checkpoint=runs/quickstart/ar_pretrain/export \
      --config.workdir=runs/sft_weak
  tunix run --plugin tunix_bd grpo.py:weak

Your own model and data (`{"prompt": ..., "answer": ...}` per line, train
and held-out prompts; your reward functions by import path, each
`fn(prompts, completions, **kwargs)`):

  tunix run --plugin tunix_bd grpo.py \
      --config.model.checkpoint=runs/my_bd/export \
      --config.data.prompts=rl.jsonl --config.data.eval=held_out.jsonl \
      --config.eval.num_prompts=100 \
      --config.reward.functions='("my_rewards:format_reward",)'

Where RL gives what SFT data cannot (`grpo.py:extrapolate`): operands of
1 to 8 digits where the SFT data has 1 to 6, so the 7- and 8-digit answers
come from the reward alone; then decode each length range:

  tunix run --plugin tunix_bd grpo.py:extrapolate
  tunix run --plugin tunix_bd generate.py \
      --config.model.checkpoint=runs/grpo_extrapolate/export \
      --config.data.min_len=7 --config.data.max_len=8 \
      --config.decode.max_new_tokens=24

Variants (`grpo.py:VARIANT`): `default`; `weak` and `extrapolate` (above);
`long`, the `count`
task with a 256-token budget on the `quickstart.py:long` model;
`realistic`, the `trace` conversion of `quickstart.py:realistic` (one TPU
v5e chip; its hyperparameters are the default's scaled to the task, not yet
tuned on the chip) with the forwards-aware reward, a bonus for correct
answers in fewer forwards (`reward.speed_gate=exact`), and
`realistic_tiny` its CPU-size twin after `quickstart.py:realistic_tiny`;
`smoke`
(alias `tiny`), a random tiny converted model and 3 steps, needing no
earlier run.
"""

import ml_collections

from tunix_bd import config_utils
from tunix_bd import mesh
from tunix_bd.data import settings as data_settings
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import from_scratch
from tunix_bd.models import sections
from tunix_bd.rl import settings
from tunix_bd.training import options

_VARIANTS = (
    "default",
    "weak",
    "extrapolate",
    "long",
    "realistic",
    "realistic_tiny",
    "smoke",
    "tiny",
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown grpo variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "grpo"
  config.workdir = "runs/grpo"
  config.seed = 0

  # Each section takes its defaults from its settings dataclass, whose
  # docstring says what each key does (`tunix_bd.models.sections`,
  # `tunix_bd.rl.settings`, `tunix_bd.generate.settings`,
  # `tunix_bd.training.options`, `tunix_bd.data.settings`, `tunix_bd.mesh`);
  # this config states what it changes.
  # model.checkpoint: the policy, a converted model; model.reference: the
  # frozen KL reference (empty: the initial policy, model.checkpoint);
  # model.continued_sft: another converted model evaluated beside the
  # policy; `random_init`: a random policy (the reference is a copy).
  config.model = config_utils.to_section(sections.GrpoModel)
  # Train prompts: `prompts` (an RL JSONL, `{"prompt", "answer"}` per line),
  # `train` (a chat JSONL) or, both empty, the embedded tasks' train split.
  # Held-out prompts: `eval` (either form; a chat record's last assistant
  # turn is the answer), which a train file needs, or, empty, the embedded
  # eval split (`tunix_bd.rl.prompt_stream.conversations`).
  config.data = config_utils.to_section(data_settings.RlData)
  config.rollout = config_utils.to_section(
      generate_settings.GrpoRollout,
      max_prompt_length=40,
      threshold=0.5,
      temperature=1.0,
  )
  config.grpo = config_utils.to_section(settings.GrpoSettings)
  config.reward = config_utils.to_section(settings.RewardSettings)
  # batch_size: prompts per step, G rollouts each; mini_batch_size and
  # train_micro_batch_size: Tunix's RLTrainingConfig, in prompts.
  config.train = config_utils.to_section(
      options.RlTrain,
      batch_size=16,
      max_steps=120,
      learning_rate=1e-4,
      weight_decay=0.0,
      eval_every_n_steps=40,
      checkpoint_every_n_steps=40,
  )
  config.eval = config_utils.to_section(options.HeldOutEval)
  # The held-out split is as long as the evaluation needs.
  config.data.num_eval = config.eval.get_ref("num_prompts")
  config.export = config_utils.to_section(sections.ExportSettings)
  # Roles share every device by default; e.g. `--config.mesh.rollout.devices=4`
  # gives the sampler 4 devices of its own (`tunix_bd.rl.meshes`).
  config.mesh = config_utils.to_section(mesh.RoleMeshSettings)

  if variant == "weak":
    config.workdir = "runs/grpo_weak"
    config.model.update(
        checkpoint="runs/sft_weak/export", reference="runs/sft_weak/export"
    )
    # The README's measured run (a weak start has headroom for a larger step).
    config.train.learning_rate = 3e-4
  if variant == "extrapolate":
    config.workdir = "runs/grpo_extrapolate"
    # Mixed with the lengths SFT saw, so the policy keeps them (trained on
    # 7-8 digits alone it learned to write longer answers everywhere).
    config.data.update(min_len=1, max_len=8)
    config.rollout.max_new_tokens = 24  # An 8-digit `double` is 16 tokens.
    config.train.update(max_steps=960, learning_rate=3e-4)
  if variant == "long":
    config.workdir = "runs/grpo_long"
    config.model.update(
        checkpoint="runs/quickstart_long/sft/export",
        reference="runs/quickstart_long/sft/export",
    )
    config.data.tasks = ("count",)
    config.rollout.update(max_new_tokens=256)
    config.train.update(batch_size=4)
    config.grpo.update(num_generations=4)
    config.eval.update(num_prompts=64, sampled_samples=2, batch_size=16)
  if variant.startswith("realistic"):
    config.workdir = f"runs/grpo_{variant}"
    config.model.update(
        checkpoint=f"runs/quickstart_{variant}/sft/export",
        reference=f"runs/quickstart_{variant}/sft/export",
        dtype="bfloat16",
    )
    config.data.tasks = ("trace",)
    # Prompts of up to 86 characters in the chat template; answers of up
    # to 194 and the stop token. Rollouts at the lowest threshold the
    # held-out evaluation reports, where accuracy has room to gain.
    config.rollout.update(
        max_new_tokens=200, max_prompt_length=112, threshold=0.9
    )
    config.reward.update(speed_weight=0.5, speed_gate="exact")
    config.grpo.update(num_generations=4)
    config.train.update(
        batch_size=8,
        max_steps=60,
        eval_every_n_steps=30,
        checkpoint_every_n_steps=30,
    )
    config.eval.update(
        num_prompts=128,
        thresholds=(0.9, 0.97, 0.99),
        sampled_threshold=0.9,
        sampled_samples=1,
    )
  if variant == "realistic_tiny":
    config.model.dtype = "float32"
    config.data.num_train = 64
    config.train.update(
        batch_size=2,
        max_steps=2,
        warmup_steps=1,
        eval_every_n_steps=2,
        checkpoint_every_n_steps=2,
    )
    config.eval.update(num_prompts=4, thresholds=(0.9,), batch_size=4)
  if variant in ("smoke", "tiny"):
    config.workdir = "runs/grpo_smoke"
    config.model.update(random_init=True, reference="")
    config.model.scratch.update(from_scratch.TINY_SHAPE)
    config.model.scratch_bd.block_size = 4
    config.data.update(num_train=64, max_len=3)
    config.rollout.update(max_new_tokens=8, max_prompt_length=32)
    config.grpo.update(num_generations=4)
    config.train.update(
        batch_size=2,
        max_steps=3,
        warmup_steps=1,
        eval_every_n_steps=3,
        checkpoint_every_n_steps=3,
    )
    config.eval.update(
        num_prompts=8, thresholds=(0.5,), sampled_samples=2, batch_size=8
    )
  return config
