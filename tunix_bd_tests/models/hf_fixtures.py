# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Round trips of the Hugging Face fixtures in testdata/hf, for the tests.

The fixtures are random Qwen3 and Qwen2 checkpoints that transformers wrote
itself, with torch's causal logits in `oracle.npz` (testdata/hf/README.md).
`round_trip` converts one (through the `sft` recipe, or by provisioning the
mask token and exporting as SFT does) and returns the source, the export
and the in-memory model that was exported; the helpers read exports back as
transformers and tunix_bd do. `hf_roundtrip_test` asserts on them; run
this module for the round-trip table with every fixture through SFT:

  python -m tunix_bd_tests.models.hf_fixtures
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
from typing import Any
from unittest import mock
import warnings

from flax import nnx
import jax
import numpy as np
import safetensors
from tunix.generate import utils as generate_utils
from tunix_bd import config_files
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd.recipes import sft
from tunix_bd_tests import test_common

TESTDATA = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "testdata", "hf"
)
# Fixture -> its family.
FIXTURES = {
    "q3_tied_hd32": "qwen3",
    "q3_bf16": "qwen3",
    "qwen2_tied": "qwen2",
    "qwen2_untied": "qwen2",
}
# The config.json fields an export may change (`hf_checkpoint`'s documented
# changes); every other source field is kept as it is.
CHANGED_FIELDS = (
    "vocab_size",
    "dtype",
    "torch_dtype",
    "architectures",
    "transformers_version",
)


@dataclasses.dataclass
class RoundTrip:
  """One fixture converted and exported.

  Attributes:
    source: the copy of the fixture that was converted.
    export: the export directory.
    model: the in-memory model that was exported (LoRA merged).
    how: "sft", "sft+lora" or "export" (no training).
  """

  source: str
  export: str
  model: Any
  how: str


def copy(name: str, root: str) -> str:
  """A writable copy of fixture `name` under `root`."""
  target = os.path.join(root, name, "source")
  shutil.copytree(os.path.join(TESTDATA, name), target)
  return target


def oracle(directory: str) -> tuple[np.ndarray, np.ndarray]:
  """torch's `(tokens [3, 24] int32, causal logits [3, 24, vocab])`."""
  data = np.load(os.path.join(directory, "oracle.npz"))
  return data["tokens"].astype(np.int32), data["logits"]


def causal_logits(model: Any, tokens: np.ndarray) -> np.ndarray:
  """The model's causal forward, `[batch, length, vocab]` float32."""
  batch, length = tokens.shape
  positions = np.broadcast_to(np.arange(length, dtype=np.int32), tokens.shape)
  mask = generate_utils.make_causal_attn_mask(
      np.ones((batch, length), bool), length
  )
  logits, _ = test_common.JittedModel(model)(tokens, positions, None, mask)
  return np.asarray(logits, np.float32)


def rounded(model: Any, dtype: Any) -> Any:
  """A copy of `model` with every parameter rounded to `dtype` and back."""
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  params = jax.tree.map(lambda x: x.astype(dtype).astype(x.dtype), params)
  return nnx.merge(graphdef, params, rest)


class _Messages(logging.Handler):

  def __init__(self):
    super().__init__(logging.WARNING)
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


def transformers_messages(directory: str) -> list[str]:
  """What transformers warns while loading `directory`'s config, tokenizer
  and generation config: its log records and Python warnings."""
  import transformers  # pylint: disable=g-import-not-at-top

  handler = _Messages()
  logger = logging.getLogger("transformers")
  logger.addHandler(handler)
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      transformers.AutoConfig.from_pretrained(directory)
      transformers.AutoTokenizer.from_pretrained(directory)
      if os.path.isfile(
          os.path.join(directory, bd_formats.GENERATION_CONFIG_FILE)
      ):
        transformers.GenerationConfig.from_pretrained(directory)
  finally:
    logger.removeHandler(handler)
  return handler.messages + [str(w.message) for w in caught]


def read_json(directory: str, name: str) -> dict[str, Any]:
  with open(os.path.join(directory, name)) as f:
    return json.load(f)


def config_diff(source: dict[str, Any], export: dict[str, Any]) -> dict:
  """`{"same": [...], "changed": {k: (src, export)}, "added", "dropped"}`."""
  return {
      "same": sorted(k for k in source if export.get(k, ()) == source[k]),
      "changed": {
          k: (source[k], export[k])
          for k in sorted(source)
          if k in export and export[k] != source[k]
      },
      "added": sorted(set(export) - set(source)),
      "dropped": sorted(set(source) - set(export)),
  }


def weight_dtypes(directory: str) -> set[str]:
  """The dtypes of every tensor in `directory`'s weight files."""
  found = set()
  for name in os.listdir(directory):
    if name.endswith(".safetensors"):
      with safetensors.safe_open(
          os.path.join(directory, name), framework="numpy"
      ) as f:
        found.update(f.get_slice(k).get_dtype() for k in f.keys())
  return {hf_checkpoint.FILE_DTYPES[d] for d in found}


def _sft(source: str, workdir: str, lora_rank: int) -> tuple[str, Any]:
  """Converts `source` with two steps of the `sft` recipe."""
  config = config_files.get_config("sft", "tiny")
  config.model.checkpoint = source
  config.workdir = workdir
  config.lora.rank = lora_rank
  # Unpacked: eight short rows each way, whatever the fixture's tokenizer.
  config.data.update(num_train=8, num_eval=8, packing=False)
  config.eval.batch_size = 8
  config.train.update(
      max_steps=2, eval_every_n_steps=100, checkpoint_every_n_steps=100
  )
  # The real export, watched for the model it is given.
  with mock.patch.object(
      bd_export,
      "export_block_diffusion",
      wraps=bd_export.export_block_diffusion,
  ) as spy:
    sft.run(config)
  return os.path.join(workdir, "export"), spy.call_args.args[0]


def export_untrained(
    source: str,
    export_dir: str,
    *,
    chat_options: chat.ChatOptions = chat.ChatOptions(enable_thinking=False),
    fmt: str = bd_export.TUNIX_BD,
    **bd: Any,
) -> tuple[str, Any]:
  """Provisions the mask token and exports as `sft` does, untrained, in
  `fmt`; `bd` overrides `BlockDiffusionConfig` fields (block size 4)."""
  tokenizer = tokenizer_lib.load_tokenizer(source)
  model, _ = hf_checkpoint.load(source)
  model, _, mask_id = mask_token_lib.provision_mask_token(
      model, tokenizer, stop_ids=(tokenizer.eos_token_id,)
  )
  bd_export.export_block_diffusion(
      model,
      tokenizer,
      export_dir,
      bd=bd_config_lib.BlockDiffusionConfig(
          **{"block_size": 4, **bd}, mask_token_id=mask_id
      ),
      chat_options=chat_options,
      source=hf_checkpoint.read_source(source),
      fmt=fmt,
  )
  return export_dir, model


def round_trip(name: str, root: str, how: str) -> RoundTrip:
  """Fixture `name` copied under `root`, converted `how` and exported.

  Args:
    name: a `FIXTURES` key.
    root: a scratch directory.
    how: "sft", "sft+lora" (LoRA rank 4, merged for the export) or
      "export" (the mask token provisioned and the model exported untrained).
  """
  source = copy(name, root)
  if how == "export":
    export_dir, model = export_untrained(
        source, os.path.join(root, name, "export")
    )
  else:
    lora_rank = 4 if how == "sft+lora" else 0
    export_dir, model = _sft(source, os.path.join(root, name, "run"), lora_rank)
  return RoundTrip(source, export_dir, model, how)


def table_row(name: str, trip: RoundTrip) -> dict[str, Any]:
  """The round-trip table's figures for one fixture."""
  tokens, torch_logits = oracle(trip.source)
  source_model, _ = hf_checkpoint.load(trip.source)
  exported, _ = hf_checkpoint.load(trip.export)
  (file_dtype,) = weight_dtypes(trip.export)
  ours = causal_logits(trip.model, tokens)
  ours_in_file_dtype = causal_logits(rounded(trip.model, file_dtype), tokens)
  diff = config_diff(
      read_json(trip.source, "config.json"),
      read_json(trip.export, "config.json"),
  )
  return {
      "fixture": name,
      "family": FIXTURES[name],
      "how": trip.how,
      "in: max |ours - torch|": float(
          np.abs(causal_logits(source_model, tokens) - torch_logits).max()
      ),
      "out: max |export - ours|": float(
          np.abs(causal_logits(exported, tokens) - ours).max()
      ),
      "out: max |export - ours in the file dtype|": float(
          np.abs(causal_logits(exported, tokens) - ours_in_file_dtype).max()
      ),
      "config fields identical": len(diff["same"]),
      "changed": diff["changed"],
      "added / dropped": (diff["added"], diff["dropped"]),
      "warnings on load": len(transformers_messages(trip.export)),
      "weights in -> out": (
          sorted(weight_dtypes(trip.source)),
          sorted(weight_dtypes(trip.export)),
      ),
  }


def main() -> None:
  root = tempfile.mkdtemp()
  for name in FIXTURES:
    how = "sft+lora" if name == "qwen2_tied" else "sft"
    row = table_row(name, round_trip(name, root, how))
    print(json.dumps(row, default=str))
  shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
  main()
