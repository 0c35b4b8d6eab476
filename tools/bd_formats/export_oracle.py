# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
r"""Runs our SDAR and Fast-dLLM v2 exports through the formats' own code.

Regenerates tunix_bd_tests/testdata/bd_formats/export_{sdar,fast_dllm_v2}/:
what SDAR's and Fast-dLLM v2's PyTorch code compute on a deterministic tiny
model of ours exported in their format (`tunix_bd_tests/models/bd_export_tiny.py`,
`export.format=sdar` / `fast_dllm_v2` with `export.reference_code`): the
inference logits and their greedy block decoders' tokens. tunix_bd's tests
re-create the same exports and check ours against these, without torch.

Two environments (tools/bd_formats/README.md): tunix_bd's, which writes the
exports, and the formats' (transformers 4.53.1), which runs this script:

  venv-bd-formats/bin/python tools/bd_formats/export_oracle.py \
      --tunix_python PATH/TO/venv/bin/python \
      --sdar_repo PATH/TO/SDAR --fast_dllm_model PATH/TO/Fast_dLLM_v2_7B
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile

# As make_fixtures.py: their modules compile flex attention at import.
os.environ["TORCHDYNAMO_DISABLE"] = "1"

import numpy as np  # pylint: disable=g-import-not-at-top,g-bad-import-order

import common  # pylint: disable=g-import-not-at-top,g-bad-import-order
import fast_dllm_oracle  # pylint: disable=g-import-not-at-top,g-bad-import-order
import sdar_oracle  # pylint: disable=g-import-not-at-top,g-bad-import-order

_REPO = pathlib.Path(__file__).resolve().parents[2]
_OUT = _REPO / "tunix_bd_tests" / "testdata" / "bd_formats"
_SDAR_CODE_DIR = "training/model/SDAR-4B-Chat"
_LENGTH = 24
_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")


def _export(tunix_python, out, sdar_repo, fast_dllm_model):
  """Writes both exports with tunix_bd (its own environment) into `out`."""
  env = dict(os.environ, PYTHONPATH=str(_REPO), JAX_PLATFORMS="cpu")
  subprocess.run(
      [
          tunix_python,
          "-m",
          "tunix_bd_tests.models.bd_export_tiny",
          str(out),
          "--reference_code",
          f"sdar={pathlib.Path(sdar_repo) / _SDAR_CODE_DIR}",
          "--reference_code",
          f"fast_dllm_v2={fast_dllm_model}",
      ],
      check=True,
      cwd=_REPO,
      env=env,
  )


def _load(directory):
  """Their model, as their users load it: `auto_map`, remote code."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  model = transformers.AutoModelForCausalLM.from_pretrained(
      directory, trust_remote_code=True, torch_dtype=torch.float32
  ).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
  return model, tokenizer


def _their_view(model, tokenizer, fields):
  """What their config class and transformers 4.5x's tokenizer read."""
  return {
      "config_class": type(model.config).__name__,
      "model_class": type(model).__name__,
      **{f: getattr(model.config, f, None) for f in fields},
      "tokenizer_class": type(tokenizer).__name__,
      "tokenizer_eos_token": tokenizer.eos_token,
      "tokenizer_pad_token": tokenizer.pad_token,
      "tokenizer_mask_token_id": tokenizer.mask_token_id,
      "tokenizer_len": len(tokenizer),
  }


def _rows(rng, mask_spans):
  """Three rows of random words; mask tokens at `mask_spans` (row, slice)."""
  rows = rng.integers(common.FIRST_WORD_ID, common.MASK_ID, (3, _LENGTH))
  for row, span in mask_spans:
    rows[row, span] = common.MASK_ID
  return rows


def _their_outputs(
    model,
    tokenizer,
    rng,
    *,
    mask_spans,
    prompt_lengths,
    forward,
    decode_runs,
    view_fields,
):
  """Their model's logits on three rows and its decodes of three prompts.

  Args:
    model: their model, loaded from our export (`_load`).
    tokenizer: its tokenizer.
    rng: draws the rows (`_rows`), then the prompts.
    mask_spans: the rows' mask tokens, as `_rows` takes them.
    prompt_lengths: the three prompts' lengths.
    forward: `(model, rows)` -> their forward's output, with `.logits`.
    decode_runs: `(model, prompts)` -> their decodes' arrays and runs.
    view_fields: the config fields of `_their_view`.

  Returns:
    `rows`, `logits`, `prompts`, `decode`, `runs` and `view`, as `_record`
    reads them (with the format's `hashes` and `settings`).
  """
  import torch  # pylint: disable=g-import-not-at-top

  rows = _rows(rng, mask_spans)
  prompts = [
      rng.integers(common.FIRST_WORD_ID, common.MASK_ID, n).tolist()
      for n in prompt_lengths
  ]
  with torch.no_grad():
    logits = forward(model, torch.tensor(rows)).logits.numpy()
    decode, runs = decode_runs(model, prompts)
  return dict(
      rows=rows,
      logits=logits,
      prompts=prompts,
      decode=decode,
      runs=runs,
      view=_their_view(model, tokenizer, view_fields),
  )


def _sdar(directory, sdar_repo, rng):
  import torch  # pylint: disable=g-import-not-at-top

  model, tokenizer = _load(directory)
  spec = importlib.util.spec_from_file_location(
      "sdar_generate", pathlib.Path(sdar_repo) / sdar_oracle.GENERATE
  )
  gen_mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gen_mod)
  outputs = _their_outputs(
      model,
      tokenizer,
      rng,
      mask_spans=[(1, slice(13, 15)), (1, slice(17, 20)), (2, slice(20, None))],
      prompt_lengths=(6, 8, 13),
      forward=lambda model, rows: model(
          rows,
          attention_mask=sdar_oracle._block_causal(_LENGTH),  # pylint: disable=protected-access
          position_ids=torch.arange(_LENGTH)[None],
      ),
      decode_runs=lambda model, prompts: sdar_oracle._decode_runs(  # pylint: disable=protected-access
          model, gen_mod, prompts
      ),
      view_fields=("block_size", "mask_token_id"),
  )
  files = [sdar_oracle.GENERATE] + [
      f"{_SDAR_CODE_DIR}/{n}"
      for n in (
          "modeling_sdar.py",
          "configuration_sdar.py",
          "fused_linear_diffusion_cross_entropy.py",
      )
  ]
  hashes = {f: common.sha256(pathlib.Path(sdar_repo) / f) for f in files}
  settings = {
      "block_size": sdar_oracle.BLOCK,
      "threshold": sdar_oracle.THRESHOLD,
      "gen_length": sdar_oracle.GEN_LENGTH,
      "denoising_steps": sdar_oracle.BLOCK,
  }
  return dict(outputs, hashes=hashes, settings=settings)


def _fast_dllm(directory, fast_dllm_model, rng):
  model, tokenizer = _load(directory)
  block = fast_dllm_oracle.BLOCK
  outputs = _their_outputs(
      model,
      tokenizer,
      rng,
      mask_spans=[(1, slice(10, 12)), (1, slice(13, 16)), (2, slice(17, None))],
      prompt_lengths=(5, 13, 17),
      forward=lambda model, rows: model(rows, block_size=block),
      decode_runs=fast_dllm_oracle._generate_runs,  # pylint: disable=protected-access
      view_fields=("bd_size",),
  )
  hashes = {
      f: common.sha256(pathlib.Path(fast_dllm_model) / f)
      for f in fast_dllm_oracle.CODE
  }
  settings = {
      "block_size": block,
      "threshold": fast_dllm_oracle.THRESHOLD,
      "max_new_tokens": fast_dllm_oracle.MAX_NEW_TOKENS,
      "stop_token": common.EOS_ID,
  }
  return dict(outputs, hashes=hashes, settings=settings)


def _record(fmt, directory, target, result):
  """Writes `target/oracle.npz`: their outputs and what they loaded."""
  directory = pathlib.Path(directory)
  prompt_arr, prompt_lens = common.ragged(result["prompts"])
  meta = {
      "format": fmt,
      **result["settings"],
      "mask_id": common.MASK_ID,
      "runs": result["runs"],
      "their_view": result["view"],
      "exported_files": {
          name: json.loads((directory / name).read_text()) for name in _FILES
      },
      "weights_sha256": (
          hashlib.sha256(
              (directory / "model.safetensors").read_bytes()
          ).hexdigest()
      ),
      "reference_files": result["hashes"],
      "versions": common.versions(),
  }
  target.mkdir(parents=True, exist_ok=True)
  common.write_oracle(
      target / "oracle.npz",
      {
          "logits_tokens": result["rows"],
          "logits": result["logits"].astype(np.float32),
          "decode_prompts": prompt_arr,
          "decode_prompt_lens": prompt_lens,
          **result["decode"],
      },
      meta,
  )
  return meta


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--tunix_python", required=True)
  parser.add_argument("--sdar_repo", required=True)
  parser.add_argument("--fast_dllm_model", required=True)
  parser.add_argument("--out", default=str(_OUT))
  args = parser.parse_args()
  common.use_cpu_flash_attn()
  metas = {}
  with tempfile.TemporaryDirectory() as tmp:
    _export(args.tunix_python, tmp, args.sdar_repo, args.fast_dllm_model)
    for fmt, run, code in (
        ("sdar", _sdar, args.sdar_repo),
        ("fast_dllm_v2", _fast_dllm, args.fast_dllm_model),
    ):
      directory = os.path.join(tmp, fmt)
      result = run(directory, code, np.random.default_rng(7))
      target = pathlib.Path(args.out) / f"export_{fmt}"
      metas[fmt] = _record(fmt, directory, target, result)
  print(json.dumps(metas, indent=1, sort_keys=True, default=str))
  sys.stdout.flush()


if __name__ == "__main__":
  main()
