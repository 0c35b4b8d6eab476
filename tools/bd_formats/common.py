# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the SDAR and Fast-dLLM v2 fixture generators.

Runs only in the optional torch environment (tools/bd_formats/README.md):
building the tiny tokenizer, initialising random weights, loading a
checkpoint through its own `auto_map` remote code, recording the canvases
a reference decoder feeds its model, and writing `oracle.npz`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import sys

import numpy as np

_HERE = pathlib.Path(__file__).resolve().parent
# Token ids of the base tokenizer (a 400-id byte-level BPE).
PAD_ID, IM_START_ID, EOS_ID = 0, 1, 2
FIRST_WORD_ID = 3
MASK_ID = 400  # The first id after the base tokenizer's, as in both formats.
VOCAB_SIZE = 416  # Spare embedding rows past the tokenizer, as both have.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n'"
    " + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def use_cpu_flash_attn():
  """Puts the CPU flash_attn stand-in on sys.path if the real one is absent."""
  if importlib.util.find_spec("flash_attn") is not None:
    return False
  sys.path.insert(0, str(_HERE / "cpu_flash_attn"))
  return True


def sha256(path):
  return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def write_tokenizer(base_dir, out_dir, mask_token, config_fields):
  """Writes the base tokenizer plus the mask token (id MASK_ID) to out_dir.

  Args:
    base_dir: directory whose tokenizer.json is the 400-id base tokenizer,
      or a fixture that already holds `mask_token` at MASK_ID.
    out_dir: checkpoint directory.
    mask_token: the format's mask token string.
    config_fields: extra tokenizer_config.json fields (the format's names).
  """
  from tokenizers import AddedToken, Tokenizer  # pylint: disable=g-import-not-at-top

  tok = Tokenizer.from_file(str(pathlib.Path(base_dir) / "tokenizer.json"))
  if tok.token_to_id(mask_token) is None:
    if tok.get_vocab_size() != MASK_ID:
      raise ValueError(
          f"base tokenizer in {base_dir} has {tok.get_vocab_size()} ids,"
          f" expected {MASK_ID}"
      )
    tok.add_special_tokens(
        [AddedToken(mask_token, special=True, normalized=False)]
    )
  if tok.token_to_id(mask_token) != MASK_ID:
    raise ValueError(f"{mask_token} is not id {MASK_ID} in {base_dir}")
  out_dir = pathlib.Path(out_dir)
  tok.save(str(out_dir / "tokenizer.json"))
  config = {
      "tokenizer_class": "Qwen2TokenizerFast",
      "bos_token": None,
      "eos_token": "<|im_end|>",
      "pad_token": "<|endoftext|>",
      "unk_token": None,
      "clean_up_tokenization_spaces": False,
      "model_max_length": 4096,
      **config_fields,
  }
  (out_dir / "tokenizer_config.json").write_text(
      json.dumps(config, indent=2) + "\n"
  )
  (out_dir / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def init_weights(model, seed, embed_std, hidden_std):
  """Random float32 weights with peaked softmaxes; the mask row never wins.

  Embeddings and the head get `embed_std` so that confidences spread over
  (0, 1) and a threshold decides; every other matrix `hidden_std`; norm
  scales 1 + N(0, 0.1^2); biases N(0, 0.02^2). The head's rows of the mask
  token and of the spare ids past it are zero: their logit is 0 while the
  best word's is far above, so no reference decoder ever picks them (both
  reference decoders take the argmax over the whole vocabulary, mask
  included; a trained model never predicts it).
  """
  import torch  # pylint: disable=g-import-not-at-top

  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, param in sorted(model.named_parameters()):
      if "norm" in name:
        value = 1.0 + 0.1 * torch.randn(param.shape, generator=gen)
      elif param.dim() == 1:
        value = 0.02 * torch.randn(param.shape, generator=gen)
      else:
        std = (
            embed_std
            if ("embed" in name or "lm_head" in name)
            else (hidden_std)
        )
        value = std * torch.randn(param.shape, generator=gen)
      param.copy_(value)
    model.lm_head.weight[MASK_ID:].zero_()


def write_config(out_dir, fields):
  (pathlib.Path(out_dir) / "config.json").write_text(
      json.dumps(fields, indent=2, sort_keys=True) + "\n"
  )


def save_weights(model, out_dir, config_fields, generation_fields):
  """save_pretrained's safetensors, with the format's own config files.

  save_pretrained rewrites config.json from the loaded config object, which
  drops fields (SDAR's `attn_implementation`) and adds others; the fixture
  keeps exactly the format's fields instead.
  """
  import transformers  # pylint: disable=g-import-not-at-top

  out_dir = pathlib.Path(out_dir)
  model.save_pretrained(out_dir, safe_serialization=True)
  (out_dir / "model.safetensors").chmod(0o644)
  write_config(
      out_dir,
      {**config_fields, "transformers_version": transformers.__version__},
  )
  (out_dir / "generation_config.json").write_text(
      json.dumps(
          {
              **generation_fields,
              "transformers_version": transformers.__version__,
          },
          indent=2,
          sort_keys=True,
      )
      + "\n"
  )


def random_model(out_dir, config_fields, generation_fields, seed, stds):
  """Writes a random-weight checkpoint and loads it back as its users do.

  Builds the format's model from `out_dir`'s config through `auto_map`,
  draws its weights (`init_weights`, `stds` = (embed_std, hidden_std)),
  saves it (`save_weights`) and returns it reloaded with `from_pretrained`
  in float32, eval mode. Call inside `remote_code`.
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  auto = transformers.AutoModelForCausalLM
  conf = transformers.AutoConfig.from_pretrained(
      out_dir, trust_remote_code=True
  )
  model = auto.from_config(conf, trust_remote_code=True)
  init_weights(model, seed, *stds)
  save_weights(model, out_dir, config_fields, generation_fields)
  del model
  return auto.from_pretrained(
      out_dir, trust_remote_code=True, torch_dtype=torch.float32
  ).eval()


@contextlib.contextmanager
def remote_code(ckpt_dir, code_files):
  """Copies the reference modeling files next to the checkpoint, then removes.

  Loading through `auto_map` with `trust_remote_code` is the path their
  users take; the code itself is not ours to commit, so it is only present
  while the generator runs.
  """
  ckpt_dir = pathlib.Path(ckpt_dir)
  copied = []
  try:
    for src in code_files:
      dst = ckpt_dir / pathlib.Path(src).name
      shutil.copyfile(src, dst)
      copied.append(dst)
    yield
  finally:
    for dst in copied:
      dst.unlink(missing_ok=True)


def cpu_block_masks(module):
  """Makes `create_block_mask` in a reference module default to the CPU.

  torch's `create_block_mask` defaults to device="cuda" and both reference
  training forwards call it without a device.
  """
  from torch.nn.attention import flex_attention  # pylint: disable=g-import-not-at-top

  module.create_block_mask = functools.partial(
      flex_attention.create_block_mask, device="cpu"
  )


class ForwardRecorder:
  """Counts a model's forwards, keeps their inputs, tracks threshold margins.

  Wraps the instance's `forward`: Fast-dLLM's decoders call
  `self.forward(...)` directly, which module hooks never see. With a
  `threshold`, every denoising forward (see `denoising`) also updates
  `margin`: the smallest |max softmax probability - threshold| over the
  masked positions of its input, the distance by which float noise would
  have to move a confidence to flip a commit decision.
  """

  _FLAGS = ("update_past_key_values", "store_kv", "use_block_cache")

  def __init__(self, model, threshold=None, shifted=False, denoising=None):
    self.calls = []
    self.margin = float("inf")
    self._model = model
    inner = model.forward

    def forward(*args, **kwargs):
      ids = kwargs.get("input_ids", args[0] if args else None)
      flags = {k: kwargs.get(k) for k in self._FLAGS}
      out = inner(*args, **kwargs)
      self.calls.append((ids.detach().clone().numpy(), flags))
      if threshold is not None and denoising(flags):
        self._track(ids, out.logits, threshold, shifted)
      return out

    model.forward = forward

  def _track(self, ids, logits, threshold, shifted):
    import torch  # pylint: disable=g-import-not-at-top

    if logits.shape[1] != ids.shape[1]:
      return
    if shifted:
      logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
    masked = ids == MASK_ID
    if masked.any():
      probs = torch.softmax(logits.float(), dim=-1).max(dim=-1).values
      gap = (probs[masked] - threshold).abs().min().item()
      self.margin = min(self.margin, gap)

  def close(self):
    del self._model.forward  # Back to the class's method.


def ragged(rows, fill=-1):
  """[n, max_len] int64 padded with `fill`, and the lengths [n]."""
  width = max(len(r) for r in rows)
  out = np.full((len(rows), width), fill, np.int64)
  for i, r in enumerate(rows):
    out[i, : len(r)] = r
  return out, np.array([len(r) for r in rows], np.int64)


def write_oracle(path, arrays, meta):
  """Writes oracle.npz: the arrays plus `meta`, a JSON string."""
  arrays = dict(arrays)
  arrays["meta"] = np.array(json.dumps(meta, indent=1, sort_keys=True))
  np.savez_compressed(path, **arrays)


def versions():
  import tokenizers  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  return {
      "torch": torch.__version__,
      "transformers": transformers.__version__,
      "tokenizers": tokenizers.__version__,
      "python": sys.version.split()[0],
      "TORCHDYNAMO_DISABLE": os.environ.get("TORCHDYNAMO_DISABLE"),
  }
