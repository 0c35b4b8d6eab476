# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Memory on paper: does a GRPO split fit, and what an SFT step holds.

From a model's shape and a device split (actor, reference, rollout), gives
the bytes each device holds, under these stated assumptions:

* Actor: float32 parameters (the master weights), float32 gradients, and
  AdamW's two moments in float32 (`optax.adamw` keeps its moments in the
  parameters' dtype); every weight sharded over all the role's devices
  (`fsdp` x `tp`). Full fine-tuning, no LoRA.
* Reference and rollout: their own bfloat16 copies of the parameters.
* KV cache (rollout): `rollout_batch x (prompt_length + rollout_length) x
  layers x kv_heads x head_dim x 2 (K and V) x 2 bytes` (bfloat16), split
  over the rollout devices.
* Replay activations (actor, one micro-batch of `train_micro_batch` rows):
  `core.replay` runs one clean forward over at most `prompt + rollout`
  tokens, kept for the backward pass, then scans canvas groups of
  `canvases.GROUP_TOKENS` query tokens, each rematerialised (canvases that
  fit one group ride on the clean forward: the same bound). Saved per
  token and layer, in bfloat16: the two norm inputs (2 x embed), q/k/v
  and their norm inputs and the attention output (3 x (heads + kv_heads)
  x head_dim), and the MLP's gate, up and product (3 x intermediate);
  attention scores are not materialised (flash/splash attention). Plus
  float32 logits of one group and the clean pass's block-end logits.
  Split over the actor devices.

A role that shares the actor's devices adds its memory to theirs (a rollout
there decodes with the actor's own weights: its KV cache alone). "Fits"
means the total is at most `USABLE` of the device's memory (the rest is left
to XLA's temporaries and fragmentation). Commands:

    python -m benchmarks.memory_plan              # docs/real_models.md's table
    python -m benchmarks.memory_plan --model Qwen3-8B --actor 8 --rollout 8

`sft_step_plan` estimates one full fine-tuning SFT step on one device (the
figure `bench_sft` prints beside XLA's own), under these assumptions:
float32 parameters, gradients and AdamW moments; per token and layer the
activations above in the compute dtype, plus the dense attention's scores
(tunix_bd needs the masked dense path): `heads x keys` per query, three
float32 copies (scores, masked, softmax) and the compute-dtype
probabilities, as XLA's CPU plan holds them; with `remat` only each
layer's input (`decoder`) or its two block inputs (`block`) are kept, plus
one layer's activations being recomputed; the backward's cotangents of one
layer's activations; and the float32 logits the loss
holds: two `[rows, vocab]` copies dense (over both copies of the
clean-context layout), four for Tunix's AR loss (with its one-hots), three
`[rows, chunk]` copies chunked (over the noisy rows only). Calibrated
against XLA's own estimate of 1- and 2-layer steps at Qwen3-0.6B's widths.
Plus the update's temporaries: XLA's CPU plan of the whole step (AdamW
after global-norm clipping, weights and moments donated) holds about four
more parameter-sized buffers per decoder layer than the gradients (3.75
measured by its memory analysis of 2- and 6-layer steps at Qwen3-0.6B's
widths, remat `decoder`); `SftStep.update_buffers` sets the count, 0 for an
update in place. A step's rows are `batch_size` x the canvases per example
(two with complementary masking, the `sft` recipe's default).

XLA's TPU plan of the same step holds less (`SftStep.backend="tpu"`,
calibrated against its memory analysis of 2- and 4-layer bfloat16 steps at
Qwen3-0.6B's widths on a TPU v5e, `tools/tpu/sft_memory.py`): it fuses the
attention's softmax, so per token, layer and key only `TPU_SCORE_BYTES`
per head stay (no float32 copies; one, in the layer that remat `decoder`
recomputes); the activations above take `TPU_ACTIVATION_SCALE` times their
size; the loss holds one float32
`[rows, vocab]` copy for Tunix's AR loss and none beyond the chunk for the
chunked loss; and the update runs in place, but two float32
embedding-sized buffers (the tied table's two gradient paths) stay. Held
out: 12 steps of 2 to 6 layers and every remat mode, within 7 %. Not yet
at 28 layers, where the peak moves from the backward pass to the update
(docs/results.md, "TPU v5e"). Through the Splash kernel
(`SftStep.splash`) no scores stay, only a float32 log-sum-exp per query
and head: within 11 % of four chip steps (1 x 8192 and 16 x 512 tokens,
both layouts).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Mapping, Sequence

GIB = 1024**3
_F32, _BF16 = 4, 2
# XLA's TPU plan of an SFT step (see the module doc): bytes per token, layer,
# key and head of the attention scores, and the activations' factor.
TPU_SCORE_BYTES = 1.25
TPU_ACTIVATION_SCALE = 1.38
# Query tokens per rematerialised replay group (`core.canvases.GROUP_TOKENS`).
_REPLAY_GROUP_TOKENS = 64


@dataclasses.dataclass(frozen=True)
class ModelShape:
  """A Qwen3's dimensions (Tunix `ModelConfig` names)."""

  num_layers: int
  embed_dim: int
  hidden_dim: int  # The MLP's intermediate size.
  num_heads: int
  num_kv_heads: int
  head_dim: int
  vocab_size: int
  tied_embedding: bool

  def layer_shapes(self) -> list[tuple[int, ...]]:
    """The shapes of one decoder layer's weights (Tunix's Einsum kernels):
    q, k, v, o, the MLP's gate, up and down, then the input and
    post-attention norms and the q and k norms."""
    d, hd, h = self.embed_dim, self.head_dim, self.hidden_dim
    heads, kv = self.num_heads, self.num_kv_heads
    layer = [(d, heads, hd), (d, kv, hd), (d, kv, hd), (heads, hd, d)]
    return layer + [(d, h), (d, h), (h, d), (d,), (d,), (hd,), (hd,)]

  def weight_shapes(self) -> list[tuple[int, ...]]:
    """The shapes of the Tunix Qwen3's weights: the layers', the embedding
    (and an untied head), the final norm."""
    tables = [(self.vocab_size, self.embed_dim)]
    tables *= 1 if self.tied_embedding else 2
    return self.num_layers * self.layer_shapes() + tables + [(self.embed_dim,)]

  def layer_params(self) -> int:
    """Parameters of one decoder layer."""
    return sum(math.prod(dims) for dims in self.layer_shapes())

  def num_params(self) -> int:
    """Parameters of the Tunix Qwen3 of this shape."""
    return sum(math.prod(dims) for dims in self.weight_shapes())


def optimizer_state_bytes(shape: ModelShape, optimizer: str) -> float:
  """The float32 state of `train.optimizer` over all of a model's weights.

  AdamW: two moments of every weight. Adafactor (optax's
  `scale_by_factored_rms`): a weight whose two largest dimensions are both
  at least 128 keeps its squared gradients' means over each of them (a row
  and a column); any other weight keeps them whole.
  """
  if optimizer == "adamw":
    return 2 * shape.num_params() * _F32
  floats = 0
  for dims in shape.weight_shapes():
    size = math.prod(dims)
    smaller, larger = sorted(dims)[-2:] if len(dims) > 1 else (0, 0)
    floats += size // smaller + size // larger if smaller >= 128 else size
  return floats * _F32


# The published configs (Hugging Face `Qwen/Qwen3-*` config.json).
QWEN3 = {
    "Qwen3-0.6B": ModelShape(28, 1024, 3072, 16, 8, 128, 151936, True),
    "Qwen3-8B": ModelShape(36, 4096, 12288, 32, 8, 128, 151936, False),
    "Qwen3-32B": ModelShape(64, 5120, 25600, 64, 8, 128, 151936, False),
}

# The fraction of a device's memory a plan may fill.
USABLE = 0.9
# Memory per device, in bytes.
ACCELERATORS = {
    "TPU v5e": 16 * GIB,
    "TPU v5p": 95 * GIB,
    "H200": 141 * 10**9,
}


@dataclasses.dataclass(frozen=True)
class Workload:
  """What one GRPO step decodes and trains on."""

  prompt_length: int = 256
  rollout_length: int = 1024
  block_size: int = 32
  rollout_batch: int = 64  # Rows decoded at once (prompts x generations).
  train_micro_batch: int = 8  # Rows per replay forward and backward.


@dataclasses.dataclass(frozen=True)
class Split:
  """Devices per role; 0 for reference or rollout shares the actor's."""

  actor: int
  reference: int = 0
  rollout: int = 0

  def __post_init__(self):
    if self.actor < 1 or self.reference < 0 or self.rollout < 0:
      raise ValueError(f"a split needs actor >= 1 and others >= 0: {self}.")


@dataclasses.dataclass(frozen=True)
class DevicePlan:
  """Bytes on one device of a device group, by what holds them."""

  devices: int
  parts: Mapping[str, float]

  @property
  def total(self) -> float:
    return sum(self.parts.values())

  def fits(self, memory_bytes: float) -> bool:
    return self.total <= USABLE * memory_bytes


def _activation_bytes_per_token(shape: ModelShape) -> float:
  heads = (shape.num_heads + shape.num_kv_heads) * shape.head_dim
  per_layer = 2 * shape.embed_dim + 3 * heads + 3 * shape.hidden_dim
  return shape.num_layers * per_layer * _BF16


def replay_activation_bytes(shape: ModelShape, work: Workload) -> float:
  """Activation bytes of one replay micro-batch (all actor devices)."""
  per_token = _activation_bytes_per_token(shape)
  clean_tokens = work.prompt_length + work.rollout_length
  block_ends = work.rollout_length // work.block_size
  group = _REPLAY_GROUP_TOKENS * (per_token + shape.vocab_size * _F32)
  per_row = (
      clean_tokens * per_token + block_ends * shape.vocab_size * _F32 + group
  )
  return work.train_micro_batch * per_row


@dataclasses.dataclass(frozen=True)
class SftStep:
  """One SFT step: `[batch_size, length]` canvases and how they are run.

  Attributes:
    batch_size: rows.
    length: tokens per row (the noisy canvas's).
    clean_context: the `[noisy ; clean]` layout (twice the tokens).
    autoregressive: Tunix's plain AR loss (dense logits and one-hots).
    dtype_bytes: bytes of the compute dtype (4 float32, 2 bfloat16).
    remat: `none`, `block` or `decoder` (`model.remat`).
    logits_chunk: vocabulary columns per chunk; 0 for dense logits.
    update_buffers: parameter-sized buffers per decoder layer the optimizer
      update holds beyond the gradients (see the module doc); XLA's CPU
      plan only.
    backend: whose plan: `cpu` (XLA's CPU plan) or `tpu` (XLA's TPU plan).
    optimizer: `adamw` or `adafactor` (`optimizer_state_bytes`).
    splash: block-diffusion attention through the Splash kernel
      (`model.attention=splash`): no scores are kept, only each query's
      float32 log-sum-exp per head.
  """

  batch_size: int
  length: int
  clean_context: bool = True
  autoregressive: bool = False
  dtype_bytes: int = 4
  remat: str = "none"
  logits_chunk: int = 8192
  update_buffers: int = 4
  backend: str = "cpu"
  optimizer: str = "adamw"
  splash: bool = False

  def __post_init__(self):
    if self.backend not in ("cpu", "tpu"):
      raise ValueError(f"backend must be 'cpu' or 'tpu', got {self.backend!r}.")


def sft_step_plan(shape: ModelShape, step: SftStep) -> DevicePlan:
  """The bytes one device holds in a full fine-tuning SFT step (see module)."""
  params = shape.num_params()
  copies = 2 if step.clean_context and not step.autoregressive else 1
  keys = copies * step.length
  tokens = step.batch_size * keys
  heads = (shape.num_heads + shape.num_kv_heads) * shape.head_dim
  tpu = step.backend == "tpu"
  kept_per_layer = (
      2 * shape.embed_dim + 3 * heads + 3 * shape.hidden_dim
  ) * step.dtype_bytes
  if tpu:
    kept_per_layer *= TPU_ACTIVATION_SCALE
    scores = shape.num_heads * keys * TPU_SCORE_BYTES
  if step.splash:
    scores = shape.num_heads * _F32
  elif not tpu:
    scores = shape.num_heads * keys * (3 * _F32 + step.dtype_bytes)
  layer = kept_per_layer + scores
  # A whole decoder layer recomputed for its backward holds float32 scores
  # on a TPU.
  recomputed = layer
  if tpu and step.remat == "decoder" and not step.splash:
    recomputed = kept_per_layer + shape.num_heads * keys * _F32
  # Kept for the backward pass, per token (and the recomputed layer's).
  kept = {
      "none": shape.num_layers * layer,
      "block": (
          2 * shape.num_layers * shape.embed_dim * step.dtype_bytes + layer
      ),
      "decoder": (
          shape.num_layers * shape.embed_dim * step.dtype_bytes + recomputed
      ),
  }[step.remat]
  if step.autoregressive:
    logits = (1 if tpu else 4) * tokens * shape.vocab_size * _F32
  elif tpu:
    logits = 0
  elif step.logits_chunk:
    rows = step.batch_size * step.length
    logits = 3 * rows * min(step.logits_chunk, shape.vocab_size) * _F32
  else:
    logits = 2 * tokens * shape.vocab_size * _F32
  if tpu:
    update = 2 * shape.vocab_size * shape.embed_dim * _F32
  else:
    update = (
        step.update_buffers * shape.num_layers * shape.layer_params() * _F32
    )
  return DevicePlan(
      1,
      {
          "parameters": params * _F32,
          "gradients": params * _F32,
          "optimizer": optimizer_state_bytes(shape, step.optimizer),
          # XLA's CPU plan also holds the backward's cotangents of a layer.
          "activations": tokens * (kept if tpu else kept + layer),
          "logits": logits,
          "update temporaries": update,
      },
  )


def kv_cache_bytes(shape: ModelShape, work: Workload) -> float:
  """KV cache bytes of one rollout batch (all rollout devices)."""
  length = work.prompt_length + work.rollout_length
  return (
      work.rollout_batch
      * length
      * shape.num_layers
      * shape.num_kv_heads
      * shape.head_dim
      * 2
      * _BF16
  )


def plan(
    shape: ModelShape, split: Split, work: Workload = Workload()
) -> dict[str, DevicePlan]:
  """Per-device bytes of each device group: "actor" and any own-device role.

  Returns:
    `{"actor": ..., "reference": ..., "rollout": ...}`, without the roles
    that share the actor's devices (their memory is in "actor").
  """
  params = shape.num_params()
  groups = {
      "actor": (
          split.actor,
          {
              "parameters": params * _F32,
              "gradients": params * _F32,
              "optimizer": 2 * params * _F32,
              "replay activations": replay_activation_bytes(shape, work),
          },
      )
  }
  roles = {
      "reference": (split.reference, {"reference copy": params * _BF16}),
      "rollout": (
          split.rollout,
          {
              "rollout copy": params * _BF16,
              "KV cache": kv_cache_bytes(shape, work),
          },
      ),
  }
  for role, (devices, parts) in roles.items():
    if devices:
      groups[role] = (devices, parts)
    else:
      parts.pop("rollout copy", None)  # The actor's own parameters.
      groups["actor"][1].update(parts)
  return {
      role: DevicePlan(devices, {k: v / devices for k, v in parts.items()})
      for role, (devices, parts) in groups.items()
  }


# The published table's rows (docs/real_models.md): (model, split).
PUBLISHED_ROWS = (
    ("Qwen3-0.6B", Split(actor=4, rollout=4)),
    ("Qwen3-8B", Split(actor=4, rollout=4)),
    ("Qwen3-8B", Split(actor=16, rollout=16)),
    ("Qwen3-32B", Split(actor=16, rollout=16)),
    ("Qwen3-32B", Split(actor=64, rollout=64)),
)


def published_table(work: Workload = Workload()) -> str:
  """The Markdown table of `PUBLISHED_ROWS` (GiB per device)."""
  names = list(ACCELERATORS)
  lines = [
      "| model | devices (actor+reference / rollout) | actor device GiB"
      " (params+grads+AdamW / reference / replay act.) | rollout device GiB"
      " (copy / KV cache) | fits on "
      + ", ".join(names)
      + " |",
      "| --- | --- | --- | --- | --- |",
  ]
  for name, split in PUBLISHED_ROWS:
    groups = plan(QWEN3[name], split, work)
    actor, rollout = groups["actor"], groups["rollout"]
    a, r = actor.parts, rollout.parts
    train = a["parameters"] + a["gradients"] + a["optimizer"]
    fits = []
    for accelerator in names:
      memory = ACCELERATORS[accelerator]
      ok = all(group.fits(memory) for group in groups.values())
      fits.append("yes" if ok else "no")
    lines.append(
        f"| {name} | {split.actor} / {split.rollout} |"
        f" {actor.total / GIB:.1f} ({train / GIB:.1f} /"
        f" {a['reference copy'] / GIB:.1f} /"
        f" {a['replay activations'] / GIB:.1f}) |"
        f" {rollout.total / GIB:.1f} ({r['rollout copy'] / GIB:.1f} /"
        f" {r['KV cache'] / GIB:.1f}) | {', '.join(fits)} |"
    )
  return "\n".join(lines)


def workload_caption(work: Workload = Workload()) -> str:
  return (
      f"Prompt {work.prompt_length} + rollout {work.rollout_length} tokens,"
      f" block {work.block_size}; {work.rollout_batch} rows decoded at once;"
      f" replay micro-batch {work.train_micro_batch} rows."
  )


def describe(groups: Mapping[str, DevicePlan]) -> str:
  """One block per device group: each part and the total, in GiB."""
  lines = []
  for role, group in groups.items():
    fits = [n for n, m in ACCELERATORS.items() if group.fits(m)]
    lines.append(
        f"{role} ({group.devices} devices): {group.total / GIB:.2f} GiB per"
        f" device; fits {', '.join(fits) or 'none listed'}"
    )
    lines += [f"  {k}: {v / GIB:.2f}" for k, v in group.parts.items()]
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", choices=sorted(QWEN3))
  parser.add_argument("--actor", type=int, default=8)
  parser.add_argument("--reference", type=int, default=0)
  parser.add_argument("--rollout", type=int, default=0)
  for field in dataclasses.fields(Workload):
    parser.add_argument(f"--{field.name}", type=int, default=field.default)
  args = parser.parse_args(argv)
  work = Workload(
      **{f.name: getattr(args, f.name) for f in dataclasses.fields(Workload)}
  )
  if args.model is None:
    print(published_table(work))
    print()
    print(workload_caption(work))
    return
  split = Split(args.actor, args.reference, args.rollout)
  print(describe(plan(QWEN3[args.model], split, work)))


if __name__ == "__main__":
  main()
