# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `generate`: decode prompts with a block-diffusion model.

Loads a converted checkpoint (HF directory + `block_diffusion.json`), decodes
the embedded task's eval split (or a user's `{"prompt", "answer"}` JSONL) by
parallel block denoising, writes one JSON line per prompt (completion,
correctness, forwards, tokens per forward) and prints exact match, tokens per
forward and tokens/s. `verify_replay=True` also replays every trace and
reports the largest |replayed - recorded| log-prob.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Sequence

import ml_collections
import numpy as np

from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import jsonl
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import denoise
from tunix_bd.core import replay
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import hf_checkpoint
from tunix_bd.recipes import common


@dataclasses.dataclass(frozen=True)
class DecodeResult:
  """Completions of a prompt set, with what they cost."""

  texts: list[str]
  num_forwards: np.ndarray  # [num_prompts]
  tokens_per_forward: np.ndarray  # [num_prompts]
  seconds: float  # wall time, compilation excluded
  max_replay_error: float | None


def load_model(checkpoint: str, mesh):
  """`(model, tokenizer, bd)` of a converted checkpoint directory."""
  bd = bd_config_lib.load_settings(checkpoint)
  tokenizer = tokenizer_lib.load_tokenizer(checkpoint)
  with mesh:
    model, _ = hf_checkpoint.load_qwen3(checkpoint, mesh=mesh)
  return model, tokenizer, bd


def check_bd_overrides(
    bd: bd_config_lib.BlockDiffusionConfig, overrides: ml_collections.ConfigDict
) -> None:
  """Fails closed when a requested setting disagrees with the checkpoint's."""
  for key, value in overrides.items():
    if value is not None and getattr(bd, key) != value:
      raise ValueError(
          f"bd.{key}={value!r} disagrees with the checkpoint, which was "
          f"trained with {key}={getattr(bd, key)!r}; a block-diffusion "
          "model must be decoded with the settings it was converted with."
      )


def denoise_config(
    tokenizer, max_prompt_length: int, **settings
) -> denoise.DenoiseConfig:
  """`DenoiseConfig(**settings)` stopping at the tokenizer's EOS, its pad."""
  return denoise.DenoiseConfig(
      max_prompt_length=max_prompt_length,
      stop_ids=(tokenizer.eos_token_id,),
      pad_id=tokenizer.pad_token_id,
      **settings,
  )


def decode_config(
    decode: ml_collections.ConfigDict, tokenizer, max_prompt_length: int
) -> denoise.DenoiseConfig:
  """The denoiser settings of a recipe's `decode` section."""
  return denoise_config(
      tokenizer,
      max_prompt_length,
      max_new_tokens=decode.max_new_tokens,
      rule=decode.rule,
      threshold=decode.threshold,
      top_k=decode.top_k,
      factor=decode.factor,
      temperature=decode.temperature,
      use_cache=decode.use_cache,
  )


def decode_prompts(
    model,
    tokenizer,
    prompts: Sequence[Sequence[int]],
    *,
    bd: bd_config_lib.BlockDiffusionConfig,
    config: denoise.DenoiseConfig,
    batch_size: int,
    seed: int = 0,
    verify_replay: bool = False,
) -> DecodeResult:
  """Decodes `prompts` in fixed-size batches (one compiled program).

  The first batch is decoded twice: once to compile, once timed, so
  `seconds` measures decoding only (not replay verification).
  """
  padded = list(prompts) + [prompts[-1]] * (-len(prompts) % batch_size)
  chunks = [
      padded[i : i + batch_size] for i in range(0, len(padded), batch_size)
  ]
  seeds = seed + np.arange(len(padded))
  denoiser = denoise.Denoiser(model, bd=bd, config=config)
  denoiser(chunks[0], seeds=seeds[:batch_size])
  texts, forwards, tpf, error, seconds = [], [], [], 0.0, 0.0
  for i, chunk in enumerate(chunks):
    start = time.perf_counter()
    out = denoiser(chunk, seeds=seeds[i * batch_size : (i + 1) * batch_size])
    seconds += time.perf_counter() - start
    texts += [tokenizer.decode(c.tolist()) for c in out.completions]
    forwards.append(out.num_forwards)
    tpf.append(out.tokens_per_forward)
    if verify_replay:
      error = max(error, replay.max_replay_error(model, out.trace))
  n = len(prompts)
  return DecodeResult(
      texts=texts[:n],
      num_forwards=np.concatenate(forwards)[:n],
      tokens_per_forward=np.concatenate(tpf)[:n],
      seconds=seconds,
      max_replay_error=error if verify_replay else None,
  )


def _prompt_set(config, tokenizer) -> list[dict[str, Any]]:
  """`[{"messages", "answer", "task"}]` from a prompts file or the task."""
  if config.data.prompts:
    records = jsonl.read_jsonl(config.data.prompts, kind="rl")
    return [dict(r, task=dataset_lib.JSONL_TASK) for r in records]
  mix = tasks_lib.TaskMix(
      tasks=tuple(config.data.tasks),
      min_len=config.data.min_len,
      max_len=config.data.max_len,
      seed=config.data.seed,
  )
  return [
      {"messages": e.messages()[:1], "answer": e.answer, "task": e.task}
      for e in mix.examples("eval", config.data.num_prompts)
  ]


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Decodes, writes completions and returns the summary figures."""
  common.require_positive(
      config, "data.num_prompts", "decode.max_new_tokens", "decode.batch_size"
  )
  checkpoint = config.model.checkpoint
  if not os.path.isdir(checkpoint):
    raise ValueError(
        f"model.checkpoint={checkpoint!r} is not a directory; convert a model "
        "first (`tunix run --plugin tunix_bd sft.py`)."
    )
  mesh = common.make_mesh(config.mesh)
  bd = bd_config_lib.load_settings(checkpoint)
  check_bd_overrides(bd, config.bd)
  tokenizer = tokenizer_lib.load_tokenizer(checkpoint)
  records = _prompt_set(config, tokenizer)
  prompts = [chat.encode_prompt(tokenizer, r["messages"]) for r in records]
  max_prompt_length = config.decode.max_prompt_length or max(
      len(p) for p in prompts
  )
  decode = decode_config(config.decode, tokenizer, max_prompt_length)
  with mesh:
    model, _ = hf_checkpoint.load_qwen3(checkpoint, mesh=mesh)
    result = decode_prompts(
        model,
        tokenizer,
        prompts,
        bd=bd,
        config=decode,
        batch_size=config.decode.batch_size,
        seed=config.decode.seed,
        verify_replay=config.verify_replay,
    )
  scores = tasks_lib.score_by_task(
      [r["task"] for r in records], result.texts, [r["answer"] for r in records]
  )
  output = config.output or os.path.join(config.workdir, "completions.jsonl")
  os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
  with open(output + ".tmp", "w", encoding="utf-8") as f:
    for r, text, n, tpf in zip(
        records, result.texts, result.num_forwards, result.tokens_per_forward
    ):
      f.write(
          json.dumps({
              "prompt": r["messages"][-1]["content"],
              "answer": r["answer"],
              "completion": text,
              "correct": tasks_lib.exact_match(text, r["answer"]),
              "task": r["task"],
              "num_forwards": int(n),
              "tokens_per_forward": round(float(tpf), 4),
          })
          + "\n"
      )
  os.replace(output + ".tmp", output)
  num_tokens = sum(len(tokenizer.encode(t)) for t in result.texts)
  summary = {
      "exact_match": scores["all"],
      "tokens_per_forward": float(np.mean(result.tokens_per_forward)),
      "tokens_per_s": num_tokens / max(result.seconds, 1e-9),
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
