# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Benchmark decoding: Tunix AR Sampler vs block diffusion (cache-free, cached).

After `quickstart.py` and `quickstart.py:long` (which train the models of the
two workloads):

  python -m benchmarks bench_decode.py

Workloads: `short`, the default digit tasks with a 16-token budget, on the
`quickstart.py` models; `long`, the `count` task (199 to 254 answer
characters) with a 256-token budget, on the `quickstart.py:long` models.
For each workload and batch size (1 and 32) it prints tokens/s and its ratio
to AR, tokens per forward and greedy exact match of each method, measured in
one run with the methods interleaved, beside the roofline (the share of the
time in model forwards, the ideal speed-up over our AR loop, the time of a
forward in each decoding program) and the TPF ceiling; then the time of a
packed trace replay over the time of the rollout it replays. One workload:
`--config.workloads=long`.

`realistic` needs no training: a randomly initialised Qwen3 of 0.26 B
parameters (Qwen3-0.6B's width, 12 layers, a 64k vocabulary) decodes 256
tokens of random prompts at exactly k tokens per forward (`top_k` commits
k per step) for k in 1, 2, 4, 8, at batch 1 and 8, against Tunix's
`Sampler` and our AR loop on the same weights:

  python -m benchmarks bench_decode.py:realistic

`--config.workload_settings.realistic.dtype=bfloat16` decodes it in
bfloat16, with the weights stored in it (as `generate.py` stores them).

`peer` puts Fast-dLLM v2's own decoder (`generate`, block cache on) beside
ours on one Fast-dLLM v2-format checkpoint (`runs/peer/fast_dllm_v2`, which
`tools/bd_formats/make_peer_checkpoint.py` writes: random weights, 6.6 M
parameters), used as both the AR and the block-diffusion model, with the
same prompts, block size and threshold; the peer runs under an interpreter
with torch and transformers 4.53.1 (tools/bd_formats/README.md):

  python -m benchmarks bench_decode.py:peer \
      --config.peer.python=PATH/TO/venv-bd-formats/bin/python \
      --config.peer.code=PATH/TO/Fast_dLLM_v2_7B

Variants: `default`; `realistic`; `peer`; `tiny` for smoke tests (the short
workload, tiny sizes); `realistic_tiny` (the realistic workload's code path
at toy size). Workloads `long8` and `long16` decode the `count` task with
the 8- and 16-token-block models of `sft.py:long8` and `sft.py:long16`:

  python -m benchmarks bench_decode.py --config.workloads="('long8',)"
"""

import ml_collections

from benchmarks import decode_bench_settings
from benchmarks import fixed_schedule
from benchmarks import peer
from tunix_bd import config_utils
from tunix_bd import mesh


def _workload(tasks, max_new_tokens, runs, bd_checkpoint=None):
  """A trained workload (`decode_bench_settings.TrainedWorkload`)."""
  return config_utils.to_section(
      decode_bench_settings.TrainedWorkload,
      tasks=tasks,
      max_new_tokens=max_new_tokens,
      ar_checkpoint=f"{runs}/ar_pretrain/export",
      bd_checkpoint=bd_checkpoint or f"{runs}/sft/export",
  )


_VARIANTS = ("default", "tiny", "realistic", "realistic_tiny", "peer")
_PEER_CHECKPOINT = "runs/peer/fast_dllm_v2"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config of variant `arg` (default: `default`)."""
  variant = arg or "default"
  if variant not in _VARIANTS:
    raise ValueError(
        f"unknown bench_decode variant {variant!r}; use one of {_VARIANTS}."
    )
  config = ml_collections.ConfigDict()
  config.recipe = "bench_decode"
  # Which of `workload_settings` to run (`workloads`), how many prompts, the
  # batch sizes, the trained workloads' commit rule (`threshold` or
  # `factor`, Fast-dLLM's rule) and its parameter, passes over all batches
  # (`repeats`; each batch counts its fastest) and a path to also write the
  # report as JSON (`output`): `benchmarks.decode_bench_settings`.
  config.update(
      config_utils.to_section(decode_bench_settings.DecodeBenchSettings)
  )
  config.workload_settings = ml_collections.ConfigDict(
      dict(
          # The quickstart's models (the dataclass's defaults).
          short=config_utils.to_section(decode_bench_settings.TrainedWorkload),
          long=_workload(("count",), 256, "runs/quickstart_long"),
          # The long workload's block-size curriculum (`sft.py:long8`, then
          # `sft.py:long16`), against the same AR teacher.
          long8=_workload(
              ("count",), 256, "runs/quickstart_long", "runs/sft_long8/export"
          ),
          long16=_workload(
              ("count",), 256, "runs/quickstart_long", "runs/sft_long16/export"
          ),
          # A Fast-dLLM v2 checkpoint, decoded by us and by their code.
          peer=_workload(
              ("sort", "reverse", "double"),
              32,
              "runs/peer",
              _PEER_CHECKPOINT,
          ),
          # A random Qwen3 of Qwen3-0.6B's width, decoded with fixed commit
          # schedules (`top_k` = k): the dataclass's defaults.
          realistic=config_utils.to_section(fixed_schedule.FixedSchedule),
      )
  )
  config.mesh = config_utils.to_section(mesh.MeshSettings)
  # A reference implementation's decoder beside ours (`benchmarks.peer`);
  # off while `python` is empty.
  config.peer = config_utils.to_section(peer.PeerSettings)
  if variant == "tiny":
    config.workloads = ("short",)
    config.workload_settings.short.max_new_tokens = 8
    config.num_prompts = 4
    config.batch_sizes = (1, 2)
  if variant.startswith("realistic"):
    config.workloads = ("realistic",)
    config.num_prompts = 8
    config.batch_sizes = (1, 8)
  if variant == "peer":
    config.workloads = ("peer",)
    config.workload_settings.peer.ar_checkpoint = _PEER_CHECKPOINT
    config.num_prompts = 16
    config.batch_sizes = (1, 8)
  if variant == "realistic_tiny":
    realistic = config.workload_settings.realistic
    realistic.model.update(
        num_layers=2,
        embed_dim=32,
        hidden_dim=64,
        num_heads=2,
        head_dim=16,
        num_kv_heads=1,
    )
    realistic.vocab_size = 256
    realistic.prompt_length = 8
    realistic.max_new_tokens = 16
    config.num_prompts = 2
    config.batch_sizes = (1, 2)
  return config
