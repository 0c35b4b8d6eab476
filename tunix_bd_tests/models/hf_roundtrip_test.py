# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Hugging Face checkpoints in and out, against transformers and torch.

Each Qwen3 and Qwen2 fixture of testdata/hf (written by transformers, with
torch's logits) loads to torch's logits, is converted (one Qwen3 and one
Qwen2 through the `sft` recipe, the Qwen2 with LoRA, exported merged; the
others by the same export, untrained) and is read back: by transformers with no warning, its
config.json and generation_config.json the source's but for the documented
changes, its weights in the source dtype, its tokenizer's `mask_token` the
mask token; and by tunix_bd with the exported model's logits. A tokenizer of
over 100,000 ids loads from an export without transformers' Mistral-regex
warning, which a config without `transformers_version` triggers. Where
torch is installed, transformers' own forward of each export is compared too.
"""

import dataclasses
import importlib.util
import json
import os
import shutil
import tempfile

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import numpy as np
import safetensors.numpy as safetensors_np
import tokenizers
import transformers
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import bd_formats
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd_tests.models import hf_fixtures
from tunix_bd_tests import test_common

# How each fixture is converted (see `hf_fixtures.round_trip`).
_HOW = {
    "q3_bf16": "sft",
    "qwen2_tied": "sft+lora",
    "q3_tied_hd32": "export",
    "qwen2_untied": "export",
}
_FIXTURES = tuple((name, name) for name in _HOW)
# Fixtures whose vocabulary is the tokenizer's: the mask token adds a row.
_GROWN = ("q3_tied_hd32", "qwen2_tied", "qwen2_untied")


class HfRoundTripTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir())
    cls.trips = {
        name: hf_fixtures.round_trip(name, cls.root, how)
        for name, how in _HOW.items()
    }

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  @parameterized.named_parameters(*_FIXTURES)
  def test_the_source_loads_to_torchs_logits(self, name):
    source = self.trips[name].source
    tokens, torch_logits = hf_fixtures.oracle(source)
    model, _ = hf_checkpoint.load(source)
    self.assertEqual(type(model).__name__, hf_fixtures.FIXTURES[name].title())
    np.testing.assert_allclose(
        hf_fixtures.causal_logits(model, tokens), torch_logits, atol=1e-4
    )

  @parameterized.named_parameters(*_FIXTURES)
  def test_transformers_loads_the_export_without_a_warning(self, name):
    trip = self.trips[name]
    self.assertEqual(hf_fixtures.transformers_messages(trip.export), [])
    settings = hf_fixtures.read_json(trip.export, "block_diffusion.json")
    tokenizer = transformers.AutoTokenizer.from_pretrained(trip.export)
    self.assertEqual(tokenizer.mask_token, "<|mask|>")
    self.assertEqual(
        settings["block_diffusion"],
        settings["block_diffusion"]
        | {"mask_token": "<|mask|>", "mask_token_id": tokenizer.mask_token_id},
    )
    self.assertIn("chat", settings)

  @parameterized.named_parameters(*_FIXTURES)
  def test_configs_are_the_sources_but_for_the_documented_changes(self, name):
    trip = self.trips[name]
    source = hf_fixtures.read_json(trip.source, "config.json")
    exported = hf_fixtures.read_json(trip.export, "config.json")
    diff = hf_fixtures.config_diff(source, exported)
    self.assertEqual((diff["added"], diff["dropped"]), ([], []))
    grown = {"vocab_size": (source["vocab_size"], source["vocab_size"] + 1)}
    self.assertEqual(diff["changed"], grown if name in _GROWN else {})
    # As transformers reads them, too (its defaults would differ).
    read = lambda d: transformers.AutoConfig.from_pretrained(d).to_dict()
    source_config, export_config = read(trip.source), read(trip.export)
    for key in ("max_position_embeddings", "bos_token_id", "eos_token_id"):
      self.assertEqual(export_config[key], source_config[key], key)
    self.assertEqual(
        hf_fixtures.read_json(trip.export, bd_formats.GENERATION_CONFIG_FILE),
        hf_fixtures.read_json(trip.source, bd_formats.GENERATION_CONFIG_FILE),
    )

  @parameterized.named_parameters(*_FIXTURES)
  def test_the_export_reloads_to_the_exported_models_logits(self, name):
    trip = self.trips[name]
    dtypes = hf_fixtures.weight_dtypes(trip.source)
    self.assertEqual(hf_fixtures.weight_dtypes(trip.export), dtypes)
    tokens, _ = hf_fixtures.oracle(trip.source)
    exported, _ = hf_checkpoint.load(trip.export)
    (dtype,) = dtypes
    # A bfloat16 export holds the trained float32 weights rounded.
    ours = hf_fixtures.rounded(trip.model, dtype)
    np.testing.assert_array_equal(
        hf_fixtures.causal_logits(exported, tokens),
        hf_fixtures.causal_logits(ours, tokens),
    )

  @parameterized.named_parameters(*_FIXTURES)
  def test_transformers_computes_the_exports_logits(self, name):
    if importlib.util.find_spec("torch") is None:
      self.skipTest("needs torch (transformers' model classes)")
    import torch  # pylint: disable=g-import-not-at-top

    trip = self.trips[name]
    tokens, _ = hf_fixtures.oracle(trip.source)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(
        trip.export, dtype=torch.float32
    ).eval()
    with torch.no_grad():
      theirs = hf_model(torch.from_numpy(tokens.astype(np.int64))).logits
    exported, _ = hf_checkpoint.load(trip.export)
    np.testing.assert_allclose(
        theirs.numpy(), hf_fixtures.causal_logits(exported, tokens), atol=1e-4
    )

  @parameterized.named_parameters(
      ("qwen2_tied", "qwen2_tied"), ("qwen2_untied", "qwen2_untied")
  )
  def test_a_qwen2_exports_as_qwen2_with_its_biases(self, name):
    trip = self.trips[name]
    config = hf_fixtures.read_json(trip.export, "config.json")
    self.assertEqual(config["architectures"], ["Qwen2ForCausalLM"])
    self.assertEqual(config["model_type"], "qwen2")
    tensors = safetensors_np.load_file(
        os.path.join(trip.export, "model.safetensors")
    )
    np.testing.assert_array_equal(
        tensors["model.layers.1.self_attn.k_proj.bias"],
        np.asarray(trip.model.layers[1].attn.k_bias.get_value()),
    )
    self.assertNotIn("model.layers.0.self_attn.q_norm.weight", tensors)

  def test_a_lora_run_exports_a_merged_model(self):
    # The `sft` recipe with `lora.rank=4` (the Qwen2 fixture's trip): what
    # it exported (`trip.model`) is the merged model, the export holds no
    # adapter and reloads without one, and LoRA changes no block-diffusion
    # setting of the export (the Qwen3 trip's, up to its own mask id).
    trip = self.trips["qwen2_tied"]
    self.assertEmpty(nnx.state(trip.model, nnx.LoRAParam))
    tensors = safetensors_np.load_file(
        os.path.join(trip.export, "model.safetensors")
    )
    self.assertEqual([k for k in tensors if "lora" in k.lower()], [])
    exported, _ = hf_checkpoint.load(trip.export)
    self.assertEmpty(nnx.state(exported, nnx.LoRAParam))
    plain = bd_config_lib.load_settings(self.trips["q3_bf16"].export)
    lora_bd = bd_config_lib.load_settings(trip.export)
    self.assertEqual(
        dataclasses.replace(lora_bd, mask_token_id=plain.mask_token_id), plain
    )


def _word_tokenizer(num_words: int) -> transformers.PreTrainedTokenizerBase:
  """A word-level tokenizer of `num_words` words plus pad and EOS."""
  vocab = {f"w{i}": i for i in range(num_words)}
  vocab.update({"<|endoftext|>": num_words, "<|im_end|>": num_words + 1})
  backend = tokenizers.Tokenizer(
      tokenizers.models.WordLevel(vocab, unk_token="w0")
  )
  backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
  return transformers.PreTrainedTokenizerFast(
      tokenizer_object=backend,
      pad_token="<|endoftext|>",
      eos_token="<|im_end|>",
  )


class LargeVocabularyTest(absltest.TestCase):

  def test_exports_record_the_transformers_version_so_no_regex_warning(self):
    root = self.create_tempdir().full_path
    # Over the 100,000 ids above which transformers 5 suspects a Mistral
    # tokenizer unless config.json names the transformers that wrote it.
    tokenizer = _word_tokenizer(100_010)
    model = test_common.tiny_qwen3(
        vocab_size=len(tokenizer), embed_dim=16, num_layers=1, tied=True
    )
    scratch = os.path.join(root, "scratch")
    export.save_checkpoint(model, scratch, tokenizer=tokenizer, stop_ids=(5,))
    self.assertEqual(hf_fixtures.transformers_messages(scratch), [])
    generation = transformers.GenerationConfig.from_pretrained(scratch)
    self.assertEqual(generation.eos_token_id, [tokenizer.eos_token_id, 5])
    self.assertEqual(generation.pad_token_id, tokenizer.pad_token_id)

    # A config.json without it (hand-written, say) warns...
    bare = os.path.join(root, "bare")
    shutil.copytree(scratch, bare)
    config = hf_fixtures.read_json(bare, "config.json")
    del config["transformers_version"]
    with open(os.path.join(bare, "config.json"), "w") as f:
      json.dump(config, f)
    (message,) = hf_fixtures.transformers_messages(bare)
    self.assertIn("fix_mistral_regex", message)
    # ... and its export does not, keeping every other field.
    again = os.path.join(root, "again")
    export.save_checkpoint(
        hf_checkpoint.load(bare)[0],
        again,
        tokenizer=tokenizer,
        source=hf_checkpoint.read_source(bare),
    )
    self.assertEqual(hf_fixtures.transformers_messages(again), [])
    diff = hf_fixtures.config_diff(
        config, hf_fixtures.read_json(again, "config.json")
    )
    self.assertEqual(
        (diff["changed"], diff["added"]), ({}, ["transformers_version"])
    )


class ExportDtypeTest(parameterized.TestCase):

  @parameterized.parameters("bfloat16", "float16", "float32")
  def test_export_dtype_sets_every_tensor_and_the_config(self, dtype):
    root = self.create_tempdir().full_path
    source = hf_fixtures.copy("q3_bf16", root)
    out = os.path.join(root, "out")
    export.save_checkpoint(
        hf_checkpoint.load(source)[0],
        out,
        source=hf_checkpoint.read_source(source),
        dtype=dtype,
    )
    self.assertEqual(hf_fixtures.weight_dtypes(out), {dtype})
    self.assertEqual(hf_fixtures.read_json(out, "config.json")["dtype"], dtype)

  def test_a_bad_export_dtype_is_refused_naming_the_key(self):
    with self.assertRaisesRegex(ValueError, r"^export\.dtype='int8' must be"):
      hf_checkpoint.check_export_dtype("int8")
    self.assertIsNone(hf_checkpoint.check_export_dtype(""))


if __name__ == "__main__":
  absltest.main()
