# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The tiny SDAR-format checkpoint and what SDAR's own code computes on it.

SDAR (JetAstra/SDAR) ships `modeling_sdar.py`, `configuration_sdar.py` and
`fused_linear_diffusion_cross_entropy.py` next to each checkpoint
(training/model/SDAR-4B-Chat/ in its repository) and decodes with
`block_diffusion_generate` in its top-level `generate.py`. This module
writes a 2-layer random-weight checkpoint in that format, loads it back
through its `auto_map`, and records:

- `logits`: the inference forward under the block-causal mask that
  `block_diffusion_generate` builds, on fixed rows (some with mask tokens);
- `train_*`: the training forward (`prepare_for_bd_training`, then the
  decoder under its flex-attention mask) on seeded noise;
- `<run>_*`: `block_diffusion_generate` on a few prompts.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np

import common

BLOCK = 4
GEN_LENGTH = 16
THRESHOLD = 0.9
MASK_TOKEN = "<|MASK|>"
# Weight scales (common.init_weights): confidences spread over (0, 1).
EMBED_STD, HIDDEN_STD = 1.0, 0.2
CODE = (
    "training/model/SDAR-4B-Chat/modeling_sdar.py",
    "training/model/SDAR-4B-Chat/configuration_sdar.py",
    "training/model/SDAR-4B-Chat/fused_linear_diffusion_cross_entropy.py",
)
GENERATE = "generate.py"


def config():
  """SDAR-4B-Chat's config.json fields, at toy sizes (head_dim != hidden/heads)."""
  return {
      "architectures": ["SDARForCausalLM"],
      "auto_map": {
          "AutoConfig": "configuration_sdar.SDARConfig",
          "AutoModel": "modeling_sdar.SDARModel",
          "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
      },
      "model_type": "sdar",
      "block_size": BLOCK,
      "mask_token_id": common.MASK_ID,
      "attention_bias": False,
      "attention_dropout": 0.0,
      "attn_implementation": "flex_attention",
      # As SDAR-4B-Chat: <|endoftext|> is BOS and EOS here (its
      # generation_config adds <|im_end|>), and there is no pad id.
      "bos_token_id": common.PAD_ID,
      "eos_token_id": common.PAD_ID,
      "debug": False,
      "ep_size": 1,
      "fuse_cross_entropy": True,
      "head_dim": 32,
      "hidden_act": "silu",
      "hidden_size": 64,
      "initializer_range": 0.02,
      "intermediate_size": 192,
      "max_position_embeddings": 512,
      "max_window_layers": 2,
      "micro_forward": False,
      "num_attention_heads": 4,
      "num_hidden_layers": 2,
      "num_key_value_heads": 2,
      "rms_norm_eps": 1e-06,
      "rope_scaling": None,
      "rope_theta": 1000000.0,
      "skip_checkpoint": False,
      "sliding_window": None,
      "tie_word_embeddings": False,
      "torch_dtype": "float32",
      "use_cache": False,
      "use_deepep": False,
      "use_sliding_window": False,
      "vocab_size": common.VOCAB_SIZE,
  }


def generation_config():
  """SDAR-4B-Chat's generation_config.json, ids mapped to the tiny vocab."""
  return {
      "bos_token_id": common.PAD_ID,
      "do_sample": True,
      "eos_token_id": [common.EOS_ID, common.PAD_ID],
      "pad_token_id": common.PAD_ID,
      "temperature": 0.6,
      "top_k": 20,
      "top_p": 0.95,
  }


def _block_causal(length):
  """The mask block_diffusion_generate builds: [1, length, length] float."""
  import torch  # pylint: disable=g-import-not-at-top

  blocks = -(-length // BLOCK)
  tril = torch.tril(torch.ones(blocks, blocks))
  full = tril.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)
  return full[None, :length, :length]


def _greedy(logits, temperature=1.0, top_k=0, top_p=1.0):
  """argmax and its probability under softmax(logits): greedy confidence."""
  import torch  # pylint: disable=g-import-not-at-top

  del temperature, top_k, top_p
  probs = torch.softmax(logits.float(), dim=-1)
  prob, token = probs.max(dim=-1)
  return token, prob


def _commit_steps(calls, prompt_len, total_len):
  """Per generated position: the denoising step that committed it."""
  mask = common.MASK_ID
  prefill = (prompt_len // BLOCK) * BLOCK
  steps = np.full(total_len, -1, np.int64)
  block_calls, start = [], prefill
  for ids, flags in calls[1 if prefill else 0 :]:
    block_calls.append(ids[0])
    if flags["store_kv"]:
      for s in range(len(block_calls) - 1):
        done = (block_calls[s] == mask) & (block_calls[s + 1] != mask)
        steps[start : start + BLOCK][done] = s
      block_calls, start = [], start + BLOCK
  return steps[prompt_len:]


def _decode_runs(model, gen_mod, prompts):
  """block_diffusion_generate on each prompt, in two settings (see meta)."""
  import torch  # pylint: disable=g-import-not-at-top

  runs = {
      # Their loop with a greedy sampler substituted (their sampler always
      # draws from the tempered softmax): argmax tokens, commit those above
      # the threshold, else the most confident one; one token per step at
      # least, since denoising_steps == block_length.
      "greedy_tau0.9": dict(sampler=_greedy, temperature=1.0, top_k=0),
      # Their code untouched, deterministic: top_k=1 makes every confidence
      # 1, so each block is committed whole at its first step (the argmax
      # of the all-mask block), whatever the threshold.
      "top1_verbatim": dict(sampler=None, temperature=1.0, top_k=1),
  }
  sampler = gen_mod.sample_with_temperature_topk_topp
  out = {}
  for name, run in runs.items():
    gen_mod.sample_with_temperature_topk_topp = run["sampler"] or sampler
    tokens, steps, forwards, margins = [], [], [], []
    for prompt in prompts:
      rec = common.ForwardRecorder(
          model, THRESHOLD, denoising=lambda f: not f["store_kv"]
      )
      ids = torch.tensor([prompt])
      x = gen_mod.block_diffusion_generate(
          model,
          prompt={"input_ids": ids},
          mask_id=common.MASK_ID,
          gen_length=GEN_LENGTH,
          block_length=BLOCK,
          denoising_steps=BLOCK,
          temperature=run["temperature"],
          top_k=run["top_k"],
          top_p=1.0,
          remasking_strategy="low_confidence_dynamic",
          confidence_threshold=THRESHOLD,
          stopping_criteria_idx=None,
      )
      rec.close()
      x = x[0].numpy()
      tokens.append(x[len(prompt) :])
      steps.append(_commit_steps(rec.calls, len(prompt), len(x)))
      forwards.append(len(rec.calls))
      margins.append(rec.margin)
    out[f"{name}_tokens"], out[f"{name}_lens"] = common.ragged(tokens)
    out[f"{name}_steps"], _ = common.ragged(steps)
    out[f"{name}_forwards"] = np.array(forwards, np.int64)
    if run["sampler"] is not None:  # Greedy confidences are softmax maxima.
      out[f"{name}_min_margin"] = np.array(margins, np.float32)
  gen_mod.sample_with_temperature_topk_topp = sampler
  return out, list(runs)


def _batch_of_two_error(model, gen_mod, prompts):
  import torch  # pylint: disable=g-import-not-at-top

  same = min(len(p) for p in prompts[:2])
  ids = torch.tensor([prompts[0][:same], prompts[1][:same]])
  try:
    gen_mod.block_diffusion_generate(
        model,
        {"input_ids": ids},
        common.MASK_ID,
        gen_length=8,
        block_length=BLOCK,
        denoising_steps=BLOCK,
    )
  except Exception as e:  # pylint: disable=broad-except
    return f"{type(e).__name__}: {e}"
  return None


def _train_forward(model, module, rows, prompt_lens, seed):
  """Their training path on seeded noise; logits of the noisy copy."""
  import torch  # pylint: disable=g-import-not-at-top

  ids = torch.tensor(np.array(rows))
  labels = ids.clone()
  for i, n in enumerate(prompt_lens):
    labels[i, :n] = -100
  pos = module.modify_padded_position_ids_2d(
      torch.arange(ids.shape[1]).repeat(ids.shape[0], 1)
  )
  model.train()
  torch.manual_seed(seed)
  concat_ids, concat_pos, flex_mask, keep_half, keep, p_mask = (
      model.prepare_for_bd_training(ids, pos, labels == -100)
  )
  hidden = model.model(
      input_ids=concat_ids,
      attention_mask=flex_mask,
      position_ids=concat_pos,
      return_dict=True,
  ).last_hidden_state
  model.eval()
  # Each row is one sample: [noisy copy ; clean copy].
  length = ids.shape[1]
  logits = model.lm_head(hidden[:, :length])
  # The same canvases through the inference path (SDPA) under their dense
  # training mask: a check on the eager flex-attention run.
  dense = module.block_attn_mask(
      module.calculate_token_nums(pos), BLOCK, ids.device
  )
  check = model(
      concat_ids, attention_mask=dense[:, None], position_ids=concat_pos
  ).logits[:, :length]
  flex_vs_sdpa = (check - logits).abs().max().item()
  # Their loss (FusedLinearDiffusionCrossEntropyLoss, sum reduction) is a
  # Triton kernel; its math: sum over masked positions of CE / p_mask,
  # divided by the number of answer tokens.
  ce = torch.nn.functional.cross_entropy(
      logits[keep_half], labels[keep_half], reduction="none"
  )
  loss = (ce / p_mask).sum() / (labels != -100).sum()
  p_full = torch.zeros(ids.shape)
  p_full[keep_half] = p_mask
  return {
      "train_tokens": ids.numpy(),
      "train_labels": labels.numpy(),
      "train_noisy_tokens": concat_ids[:, :length].numpy(),
      "train_concat_tokens": concat_ids.numpy(),
      "train_concat_positions": concat_pos.numpy(),
      "train_masked": keep_half.numpy(),
      "train_p_mask": p_full.numpy().astype(np.float32),
      "train_logits": logits.numpy().astype(np.float32),
      "train_loss": np.float32(loss.item()),
  }, {
      "train_clean_copy_has_loss": bool(keep[:, length:].any().item()),
      "train_logits_flex_vs_sdpa_max_abs": flex_vs_sdpa,
  }


def build(out_dir, sdar_repo, base_tokenizer, seed=0):
  """Writes the checkpoint and oracle.npz into out_dir; returns its meta."""
  import torch  # pylint: disable=g-import-not-at-top

  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  repo = pathlib.Path(sdar_repo)
  code = [repo / c for c in CODE]
  common.write_config(out_dir, config())
  common.write_tokenizer(
      base_tokenizer,
      out_dir,
      MASK_TOKEN,
      # As SDAR-4B-Chat's tokenizer_config.json.
      {
          "eos_token": "<|endoftext|>",
          "mask_token": MASK_TOKEN,
          "additional_special_tokens": ["<|im_start|>", MASK_TOKEN],
      },
  )
  rng = np.random.default_rng(seed)
  words = lambda n: rng.integers(common.FIRST_WORD_ID, common.MASK_ID, n)
  with common.remote_code(out_dir, code):
    model = common.random_model(
        out_dir, config(), generation_config(), seed, (EMBED_STD, HIDDEN_STD)
    )
    module = sys.modules[type(model).__module__]
    common.cpu_block_masks(module)
    spec = importlib.util.spec_from_file_location(
        "sdar_generate", repo / GENERATE
    )
    gen_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_mod)

    length = 24
    rows = np.stack([words(length) for _ in range(3)])
    rows[1, 13:15] = rows[1, 17:20] = common.MASK_ID
    rows[2, 20:] = common.MASK_ID
    with torch.no_grad():
      logits = model(
          torch.tensor(rows),
          attention_mask=_block_causal(length),
          position_ids=torch.arange(length)[None],
      ).logits.numpy()
      train, train_meta = _train_forward(
          model, module, [words(16), words(16)], [5, 7], seed
      )
      prompts = [words(6).tolist(), words(8).tolist(), words(13).tolist()]
      decode, run_names = _decode_runs(model, gen_mod, prompts)
      batch_error = _batch_of_two_error(model, gen_mod, prompts)
  for stray in out_dir.glob("*.py"):  # save_pretrained copies remote code.
    stray.unlink()
  prompt_arr, prompt_lens = common.ragged(prompts)
  meta = {
      "format": "sdar",
      "block_size": BLOCK,
      "mask_id": common.MASK_ID,
      "mask_token": MASK_TOKEN,
      "threshold": THRESHOLD,
      "gen_length": GEN_LENGTH,
      "denoising_steps": BLOCK,
      "seed": seed,
      "runs": run_names,
      "reference_files": {
          c: common.sha256(repo / c) for c in (*CODE, GENERATE)
      },
      **train_meta,
      "batch_of_two_error": batch_error,
      "versions": common.versions(),
      "cpu_flash_attn": (
          "flash_attn" not in sys.modules
          or "cpu_flash_attn" in str(sys.modules["flash_attn"].__file__)
      ),
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
      },
      meta,
  )
  return meta
