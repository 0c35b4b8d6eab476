# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""What tunix_bd hands the `tunix` host: its configs, recipes and plug-ins.

This module is imported by `tunix plugins`, so it stays free of heavy
imports: recipes are named as strings and loaded only when run.
"""

import tunix_bd
from tunix_bd import config_files
from tunix_bd.cli import plugin_api

# Each is module `tunix_bd.recipes.<name>`, whose `run` runs it.
_RECIPES = "ar_pretrain sft opd grpo generate quickstart compare".split()

PLUGIN = plugin_api.Plugin(
    name="tunix_bd",
    version=tunix_bd.__version__,
    description=(
        "Block-diffusion post-training: AR teacher, masked-diffusion SFT, "
        "parallel block denoising, on-policy distillation, GRPO/GSPO."
    ),
    config_dir=config_files.config_dir(),
    # XLA's memory-first CPU scheduler and freed host buffers returned, for
    # every recipe: both must be set before JAX starts.
    process_setup="tunix_bd.run.host_memory:prepare_process",
    recipes={name: f"tunix_bd.recipes.{name}:run" for name in _RECIPES},
    # What `--dry_run` checks: every section's values, as the recipe does.
    validators={name: "tunix_bd.recipes:check_values" for name in _RECIPES},
    registers={
        "loss hooks": [
            "masked-diffusion SFT: PeftTrainer.with_loss_fn("
            "tunix_bd.sft.loss.sft_loss), DiffusionSftTrainer"
        ],
        "distillation": [
            (
                "strategy: DiffusionOpdStrategy (forward KL on student"
                " rollouts, corrupted | trace canvases)"
            ),
            "data hooks: StudentRolloutSource (on-policy block denoising)",
            "trainer: OpdTrainer(DistillationTrainer), decode evaluation",
        ],
        "reinforcement learning": [
            (
                "policy loss: 'diffusion_grpo' (function_registry; GRPO and"
                " gspo-token on trace replay)"
            ),
            (
                "rollout engine: DiffusionRollout(BaseRollout), passed as"
                " ClusterConfig.rollout_engine=functools.partial(...)"
            ),
            "cluster: DiffusionRLCluster(RLCluster), trace-carrying generate",
            "learner: DiffusionGRPOLearner(GRPOLearner)",
            "sampler-role shim: tunix_bd.rl.role_shim.place_on_mesh",
        ],
        "model contract": [
            "diffusion_logits_fn over Tunix decoders (Qwen3, Qwen2, Llama 3)",
            "block KV cache",
        ],
        "decoding": [
            "parallel block denoising (threshold, top_k, factor)",
            "trace replay (tunix_bd.core.replay)",
        ],
        "models": [
            "tunix.models.qwen3.Qwen3, tunix.models.qwen2.Qwen2: HF"
            " safetensors in and out, LoRA"
        ],
        "data": [
            "embedded digit tasks (sort, reverse, double; opt-in add, count)",
            "chat and prompt/completion JSONL",
        ],
    },
)
