# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The tiny Fast-dLLM v2-format checkpoint and what its own code computes.

Fast-dLLM v2 (NVlabs/Fast-dLLM, v2/) ships `modeling.py` and
`configuration.py` in its Hugging Face model repositories
(Efficient-Large-Model/Fast_dLLM_v2_7B), whose `generate` is the chatbot's
decoder, and `batch_sample` in `v2/generation_functions.py`, the
evaluation harness's. This module writes a 2-layer random-weight checkpoint
in that format, loads it back through its `auto_map`, and records:

- `logits`: the inference forward (its block-causal `eval_mask`) on fixed
  rows, some with mask tokens;
- `train_*`: the training forward (seeded noise, the complementary copy,
  the flex-attention `block_diff_mask`) and its loss;
- `<run>_*`: `generate` and `batch_sample` on a few prompts.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np

import common

BLOCK = 8
MAX_NEW_TOKENS = 24
THRESHOLD = 0.9
MASK_TOKEN = "|<MASK>|"
EMBED_STD, HIDDEN_STD = 1.0, 0.2
CODE = ("modeling.py", "configuration.py")
GENERATION = "v2/generation_functions.py"


def config():
  """Fast_dLLM_v2_7B's config.json fields at toy sizes."""
  return {
      "architectures": ["Fast_dLLM_QwenForCausalLM"],
      "auto_map": {
          "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
          "AutoModel": "modeling.Fast_dLLM_QwenModel",
          "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
      },
      "model_type": "Fast_dLLM_Qwen",
      "bd_size": BLOCK,
      "conplemenrary_mask": True,  # Sic: the 7B config's key (unread).
      "attention_dropout": 0.0,
      # As Fast_dLLM_v2_7B: BOS <|endoftext|>, EOS and pad <|im_end|>.
      "bos_token_id": common.PAD_ID,
      "eos_token_id": common.EOS_ID,
      "pad_token_id": common.EOS_ID,
      "hidden_act": "silu",
      "hidden_size": 64,
      "initializer_range": 0.02,
      "intermediate_size": 192,
      "layer_types": ["full_attention", "full_attention"],
      "max_position_embeddings": 512,
      "max_window_layers": 2,
      "num_attention_heads": 4,
      "num_hidden_layers": 2,
      "num_key_value_heads": 2,
      "rms_norm_eps": 1e-06,
      "rope_scaling": None,
      "rope_theta": 1000000.0,
      "sliding_window": None,
      "tie_word_embeddings": False,
      "torch_dtype": "float32",
      "use_cache": True,
      "use_sliding_window": False,
      "vocab_size": common.VOCAB_SIZE,
  }


def generation_config():
  """Fast_dLLM_v2_7B's generation_config.json, ids mapped to the tiny vocab."""
  return {
      "bos_token_id": common.PAD_ID,
      "do_sample": True,
      "eos_token_id": [common.EOS_ID, common.PAD_ID],
      "pad_token_id": common.PAD_ID,
      "repetition_penalty": 1.05,
      "temperature": 0.7,
      "top_k": 20,
      "top_p": 0.8,
  }


def _commit_steps(calls, prompt_len, output):
  """Per generated position: the denoising step (in its block) committing it.

  -1 marks a token committed without a denoising step: the argmax of the
  previous block's last logit, which `generate` appends after each block's
  cache-writing forward (and after the prefill when the prompt fills whole
  blocks).
  """
  mask = common.MASK_ID
  steps = np.full(len(output), -1, np.int64)
  if prompt_len > BLOCK:
    calls = calls[1:]  # The prefill.
  groups, current = [], []
  for ids, flags in calls:
    if flags["update_past_key_values"]:
      groups.append((current, ids[0]))
      current = []
    else:
      current.append(ids[0])
  if current:
    groups.append((current, None))
  for k, (canvases, final) in enumerate(groups):
    start = (prompt_len // BLOCK + k) * BLOCK
    if final is None:  # Stopped inside the block: what it returned.
      final = np.full(BLOCK, mask)
      tail = output[start : start + BLOCK]
      final[: len(tail)] = tail
    for s, canvas in enumerate(canvases):
      after = canvases[s + 1] if s + 1 < len(canvases) else final
      done = (canvas == mask) & (after != mask)
      span = steps[start : start + BLOCK]
      span[done[: len(span)]] = s
  return steps[prompt_len:]


def _denoising(flags):
  """A full-block denoising forward (not the prefill or a cache write)."""
  return not flags["update_past_key_values"] and not flags["use_block_cache"]


def _generate_runs(model, prompts):
  """`Fast_dLLM_QwenForCausalLM.generate`, greedy, one prompt at a time."""
  import torch  # pylint: disable=g-import-not-at-top

  runs = {
      "generate_sb8": dict(small_block_size=8, use_block_cache=False),
      "generate_sb4": dict(small_block_size=4, use_block_cache=False),
      "generate_sb4_cache": dict(small_block_size=4, use_block_cache=True),
  }
  out = {}
  for name, run in runs.items():
    tokens, steps, forwards, margins = [], [], [], []
    for prompt in prompts:
      rec = common.ForwardRecorder(
          model, THRESHOLD, shifted=True, denoising=_denoising
      )
      x = model.generate(
          torch.tensor([prompt]),
          max_new_tokens=MAX_NEW_TOKENS,
          mask_id=common.MASK_ID,
          threshold=THRESHOLD,
          block_size=BLOCK,
          stop_token=common.EOS_ID,
          temperature=0,
          **run,
      )[0].numpy()
      rec.close()
      tokens.append(x[len(prompt) :])
      if not run["use_block_cache"]:
        steps.append(_commit_steps(rec.calls, len(prompt), x))
      forwards.append(len(rec.calls))
      margins.append(rec.margin)
    out[f"{name}_tokens"], out[f"{name}_lens"] = common.ragged(tokens)
    if steps:
      out[f"{name}_steps"], _ = common.ragged(steps)
      out[f"{name}_min_margin"] = np.array(margins, np.float32)
    out[f"{name}_forwards"] = np.array(forwards, np.int64)
  return out, list(runs)


def _batch_sample(model, gen_mod, tokenizer, prompts):
  """`batch_sample` called as v2/eval.py calls it (right-padded with masks)."""
  import torch  # pylint: disable=g-import-not-at-top

  width = max(len(p) for p in prompts)
  ids = torch.full((len(prompts), width), common.MASK_ID)
  for i, p in enumerate(prompts):
    ids[i, : len(p)] = torch.tensor(p)
  rec = common.ForwardRecorder(
      model, THRESHOLD, shifted=True, denoising=_denoising
  )
  rows = gen_mod.Fast_dLLM_QwenForCausalLM.batch_sample(
      model,
      ids,
      tokenizer=tokenizer,
      block_size=BLOCK,
      small_block_size=4,
      max_new_tokens=MAX_NEW_TOKENS,
      mask_id=common.MASK_ID,
      min_len=min(len(p) for p in prompts),
      seq_len=torch.tensor([len(p) for p in prompts]),
      use_block_cache=False,
      threshold=THRESHOLD,
      stop_token=common.EOS_ID,
  )
  rec.close()
  generated = [rows[i].numpy()[len(p) :] for i, p in enumerate(prompts)]
  return generated, len(rec.calls), rec.margin


def _batch_runs(model, gen_mod, tokenizer, prompts):
  batch, forwards, margin = _batch_sample(model, gen_mod, tokenizer, prompts)
  solo = [_batch_sample(model, gen_mod, tokenizer, [p])[0][0] for p in prompts]
  out = {}
  out["batch_sample_sb4_tokens"], out["batch_sample_sb4_lens"] = common.ragged(
      batch
  )
  out["batch_sample_sb4_forwards"] = np.array([forwards], np.int64)
  out["batch_sample_sb4_min_margin"] = np.array([margin], np.float32)
  # A batch decodes max_new_tokens // block + (longest prompt) // block
  # blocks for every row, so rows only share a prefix with their solo run.
  same = [
      bool((b[: min(len(b), len(s))] == s[: min(len(b), len(s))]).all())
      for b, s in zip(batch, solo)
  ]
  lens = {"batch": [len(b) for b in batch], "solo": [len(s) for s in solo]}
  return out, {"prefix_equal": same, "generated_lengths": lens}


def _train_forward(model, module, rows, prompt_lens, seed):
  """Their training forward on seeded noise: inputs, logits and loss."""
  import torch  # pylint: disable=g-import-not-at-top

  ids = torch.tensor(np.array(rows))
  labels = ids.clone()
  for i, n in enumerate(prompt_lens):
    labels[i, :n] = -100
  seen = {}

  def grab(mod, args, kwargs):
    del mod, args
    seen["ids"] = kwargs["input_ids"].clone()
    seen["labels"] = kwargs["labels"].clone()

  handle = model.model.register_forward_pre_hook(grab, with_kwargs=True)
  common.cpu_block_masks(module)
  model.train()
  torch.manual_seed(seed)
  # labels.clone(): their forward overwrites the labels it is given.
  out = model(input_ids=ids, labels=labels.clone(), mask_id=common.MASK_ID)
  model.eval()
  handle.remove()
  return {
      "train_tokens": ids.numpy(),
      "train_labels": labels.numpy(),
      "train_model_tokens": seen["ids"].numpy(),
      "train_model_labels": seen["labels"].numpy(),
      "train_logits": out.logits.numpy().astype(np.float32),
      "train_loss": np.float32(out.loss.item()),
  }


def build(out_dir, model_files, fast_dllm_repo, base_tokenizer, seed=0):
  """Writes the checkpoint and oracle.npz into out_dir; returns its meta."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  code = [pathlib.Path(model_files) / c for c in CODE]
  gen_path = pathlib.Path(fast_dllm_repo) / GENERATION
  common.write_config(out_dir, config())
  common.write_tokenizer(
      base_tokenizer,
      out_dir,
      MASK_TOKEN,
      {"additional_special_tokens": ["<|im_start|>", MASK_TOKEN]},
  )
  rng = np.random.default_rng(seed + 1)
  words = lambda n: rng.integers(common.FIRST_WORD_ID, common.MASK_ID, n)
  with common.remote_code(out_dir, code):
    model = common.random_model(
        out_dir, config(), generation_config(), seed, (EMBED_STD, HIDDEN_STD)
    )
    module = sys.modules[type(model).__module__]
    tokenizer = transformers.AutoTokenizer.from_pretrained(out_dir)
    # As v2/eval.py imports it; auto_docstring needs it in sys.modules.
    spec = importlib.util.spec_from_file_location(
        "generation_functions", gen_path
    )
    gen_mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen_mod
    spec.loader.exec_module(gen_mod)

    length = 3 * BLOCK
    rows = np.stack([words(length) for _ in range(3)])
    rows[1, 10:12] = rows[1, 13:16] = common.MASK_ID
    rows[2, 17:] = common.MASK_ID
    prompts = [words(5).tolist(), words(13).tolist(), words(16).tolist()]
    with torch.no_grad():
      logits = model(torch.tensor(rows), block_size=BLOCK).logits.numpy()
      train = _train_forward(
          model, module, [words(16), words(16)], [5, 7], seed
      )
      decode, run_names = _generate_runs(model, prompts)
      batch, batch_same = _batch_runs(model, gen_mod, tokenizer, prompts)
      one_block = [words(BLOCK).tolist() for _ in range(2)]
      drop = [
          model.generate(
              torch.tensor([p]),
              max_new_tokens=MAX_NEW_TOKENS,
              mask_id=common.MASK_ID,
              threshold=THRESHOLD,
              block_size=BLOCK,
              small_block_size=BLOCK,
              stop_token=common.EOS_ID,
              temperature=0,
          )[0, BLOCK:].tolist()
          for p in one_block
      ]
  for stray in out_dir.glob("*.py"):  # save_pretrained copies remote code.
    stray.unlink()
  prompt_arr, prompt_lens = common.ragged(prompts)
  meta = {
      "format": "fast_dllm_v2",
      "block_size": BLOCK,
      "mask_id": common.MASK_ID,
      "mask_token": MASK_TOKEN,
      "stop_token": common.EOS_ID,
      "threshold": THRESHOLD,
      "max_new_tokens": MAX_NEW_TOKENS,
      "seed": seed,
      "runs": [*run_names, "batch_sample_sb4"],
      "batch_sample_vs_solo": batch_same,
      "one_block_prompts_give_same_output": drop[0] == drop[1],
      "reference_files": {
          **{c: common.sha256(pathlib.Path(model_files) / c) for c in CODE},
          GENERATION: common.sha256(gen_path),
      },
      "versions": common.versions(),
  }
  common.write_oracle(
      out_dir / "oracle.npz",
      {
          "logits_tokens": rows,
          "logits": logits.astype(np.float32),
          "decode_prompts": prompt_arr,
          "decode_prompt_lens": prompt_lens,
          **train,
          **decode,
          **batch,
      },
      meta,
  )
  return meta
