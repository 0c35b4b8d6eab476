# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.hf_checkpoint on tiny real Qwen3 models."""

import errno
import json
import os
import tempfile
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import safetensors.numpy as safetensors_np
import transformers
from tunix.models.qwen2 import model as qwen2_lib
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import hf_config as hf_config_lib
from tunix_bd_tests.models import hf_tiny

_LAYERS, _VOCAB, _EMBED = hf_tiny.LAYERS, hf_tiny.VOCAB, hf_tiny.EMBED
_HIDDEN, _HEADS, _HEAD_DIM = hf_tiny.HIDDEN, hf_tiny.HEADS, hf_tiny.HEAD_DIM
_TOKENS = np.array([[5, 17, 3, 99, 127, 0, 64, 8], [1, 2, 3, 4, 5, 6, 7, 8]])
# A tiny Llama transformers wrote (theta 5e5, untied; testdata/hf/README.md).
_LLAMA = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "testdata/hf/llama_untied"
)


def _tempdir(test: absltest.TestCase) -> str:
  # Not create_tempdir(): it needs parsed absl flags, which pytest lacks.
  tmp = tempfile.TemporaryDirectory()
  test.addCleanup(tmp.cleanup)
  return tmp.name


def _hf_tensors(tied: bool, kv_heads: int, seed: int = 0) -> dict:
  """Random weights with HF shapes ([out, in]), scaled to keep O(1) logits."""
  rng = np.random.default_rng(seed)
  d, q, kv = _EMBED, _HEADS * _HEAD_DIM, kv_heads * _HEAD_DIM

  def dense(out_dim, in_dim):
    return (rng.standard_normal((out_dim, in_dim)) / np.sqrt(in_dim)).astype(
        np.float32
    )

  def norm(dim):
    return (1.0 + 0.2 * rng.standard_normal(dim)).astype(np.float32)

  tensors = {
      "model.embed_tokens.weight": (
          rng.standard_normal((_VOCAB, d)).astype(np.float32)
      ),
      "model.norm.weight": norm(d),
  }
  for i in range(_LAYERS):
    p = f"model.layers.{i}."
    tensors.update({
        p + "input_layernorm.weight": norm(d),
        p + "post_attention_layernorm.weight": norm(d),
        p + "self_attn.q_proj.weight": dense(q, d),
        p + "self_attn.k_proj.weight": dense(kv, d),
        p + "self_attn.v_proj.weight": dense(kv, d),
        p + "self_attn.o_proj.weight": dense(d, q),
        p + "self_attn.q_norm.weight": norm(_HEAD_DIM),
        p + "self_attn.k_norm.weight": norm(_HEAD_DIM),
        p + "mlp.gate_proj.weight": dense(_HIDDEN, d),
        p + "mlp.up_proj.weight": dense(_HIDDEN, d),
        p + "mlp.down_proj.weight": dense(d, _HIDDEN),
    })
  if not tied:
    tensors["lm_head.weight"] = dense(_VOCAB, d)
  return tensors


def _write_checkpoint(directory: str, hf_config: dict, tensors: dict) -> str:
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(hf_config, f)
  safetensors_np.save_file(
      tensors, os.path.join(directory, "model.safetensors")
  )
  return directory


def _numpy_logits(tensors: dict, hf_config: dict, tokens: np.ndarray):
  """HF Qwen3 forward (modeling_qwen3 conventions) in float64 NumPy."""
  t = {k: v.astype(np.float64) for k, v in tensors.items()}
  eps, theta = hf_config["rms_norm_eps"], hf_config["rope_theta"]
  n, h = hf_config["num_attention_heads"], hf_config["head_dim"]
  kv = hf_config["num_key_value_heads"]
  length = tokens.shape[-1]

  def rms_norm(x, w):
    return w * x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps)

  def rope(x):  # [T, heads, H], rotate_half convention
    inv_freq = 1.0 / theta ** (np.arange(0, h, 2) / h)
    freqs = np.arange(length)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]
    rotated = np.concatenate([-x[..., h // 2 :], x[..., : h // 2]], axis=-1)
    return x * np.cos(emb) + rotated * np.sin(emb)

  causal = np.tril(np.ones((length, length), dtype=bool))
  rows = []
  for row in tokens:
    x = t["model.embed_tokens.weight"][row]
    for i in range(hf_config["num_hidden_layers"]):
      p = f"model.layers.{i}."
      y = rms_norm(x, t[p + "input_layernorm.weight"])
      q = (y @ t[p + "self_attn.q_proj.weight"].T).reshape(length, n, h)
      k = (y @ t[p + "self_attn.k_proj.weight"].T).reshape(length, kv, h)
      v = (y @ t[p + "self_attn.v_proj.weight"].T).reshape(length, kv, h)
      q = rope(rms_norm(q, t[p + "self_attn.q_norm.weight"]))
      k = rope(rms_norm(k, t[p + "self_attn.k_norm.weight"]))
      k, v = np.repeat(k, n // kv, axis=1), np.repeat(v, n // kv, axis=1)
      scores = np.einsum("tnh,snh->nts", q, k) / np.sqrt(h)
      scores = np.where(causal, scores, -np.inf)
      probs = np.exp(scores - scores.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      attn = np.einsum("nts,snh->tnh", probs, v).reshape(length, n * h)
      x = x + attn @ t[p + "self_attn.o_proj.weight"].T
      y = rms_norm(x, t[p + "post_attention_layernorm.weight"])
      gate = y @ t[p + "mlp.gate_proj.weight"].T
      up = y @ t[p + "mlp.up_proj.weight"].T
      x = (
          x
          + (gate / (1 + np.exp(-gate)) * up) @ t[p + "mlp.down_proj.weight"].T
      )
    x = rms_norm(x, t["model.norm.weight"])
    head = t.get("lm_head.weight", t["model.embed_tokens.weight"])
    rows.append(x @ head.T)
  return np.stack(rows)


@nnx.jit
def _forward(model, tokens, positions, mask):
  return model(tokens, positions, None, mask)[0]


def _logits(model: qwen3_lib.Qwen3, tokens: np.ndarray) -> np.ndarray:
  batch, length = tokens.shape
  positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
  mask = jnp.broadcast_to(
      jnp.tril(jnp.ones((length, length), dtype=bool)), (batch, length, length)
  )
  return np.asarray(_forward(model, jnp.asarray(tokens), positions, mask))


def _params(model: qwen3_lib.Qwen3) -> dict:
  return {
      ".".join(map(str, path)): np.asarray(var.get_value())
      for path, var in nnx.state(model, nnx.Param).flat_state()
  }


def _random_model(config: qwen3_lib.ModelConfig, seed: int) -> qwen3_lib.Qwen3:
  """A Qwen3 with random NumPy weights (Tunix zero-inits its MLP kernels)."""
  abstract = nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(abstract)
  rng = np.random.default_rng(seed)
  state = jax.tree.map(
      lambda x: jnp.asarray(0.2 * rng.standard_normal(x.shape), x.dtype), state
  )
  return nnx.merge(graphdef, state)


def _read_dir_tensors(directory: str) -> dict:
  tensors = {}
  for name in sorted(os.listdir(directory)):
    if name.endswith(".safetensors"):
      tensors.update(safetensors_np.load_file(os.path.join(directory, name)))
  return tensors


class LoadTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("untied_gqa", False, 1),
      ("tied_mha", True, 2),
  )
  def test_logits_match_numpy_hf_reference(self, tied, kv_heads):
    hf_config = hf_tiny.qwen3_hf_config(tied, kv_heads)
    tensors = _hf_tensors(tied, kv_heads)
    path = _write_checkpoint(_tempdir(self), hf_config, tensors)

    model, config = hf_checkpoint.load(path)

    self.assertEqual(config.use_tied_embedding, tied)
    self.assertEqual(config.num_kv_heads, kv_heads)
    self.assertEqual(hasattr(model, "lm_head"), not tied)
    np.testing.assert_allclose(
        _logits(model, _TOKENS),
        _numpy_logits(tensors, hf_config, _TOKENS),
        rtol=1e-4,
        atol=1e-4,
    )

  @parameterized.named_parameters(("untied", False), ("tied", True))
  def test_save_reproduces_the_hf_tensors_bit_for_bit(self, tied):
    hf_config = hf_tiny.qwen3_hf_config(tied, kv_heads=1)
    tensors = _hf_tensors(tied, kv_heads=1)
    path = _write_checkpoint(_tempdir(self), hf_config, tensors)
    model, _ = hf_checkpoint.load(path)
    out = os.path.join(_tempdir(self), "export")

    export.save_checkpoint(model, out)

    saved = _read_dir_tensors(out)
    self.assertEqual(sorted(saved), sorted(tensors))
    for key, value in tensors.items():
      np.testing.assert_array_equal(saved[key], value, err_msg=key)
    with open(os.path.join(out, "config.json")) as f:
      saved_config = json.load(f)
    for key in ("vocab_size", "hidden_size", "head_dim", "tie_word_embeddings"):
      self.assertEqual(saved_config[key], hf_config[key], key)

  def test_tied_checkpoint_may_store_lm_head_equal_to_embedding(self):
    hf_config = hf_tiny.qwen3_hf_config(tied=True, kv_heads=1)
    tensors = _hf_tensors(tied=True, kv_heads=1)
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].copy()
    path = _write_checkpoint(_tempdir(self), hf_config, tensors)
    model, _ = hf_checkpoint.load(path)
    self.assertFalse(hasattr(model, "lm_head"))

    tensors["lm_head.weight"][0, 0] += 1.0
    path = _write_checkpoint(_tempdir(self), hf_config, tensors)
    with self.assertRaisesRegex(ValueError, "differs from"):
      hf_checkpoint.load(path)

  def test_file_with_mixed_dtypes_loads_exactly(self):
    # Tunix's optimized loader would read the whole file as the first dtype.
    hf_config = hf_tiny.qwen3_hf_config(tied=False, kv_heads=1)
    tensors = _hf_tensors(tied=False, kv_heads=1)
    tensors["model.norm.weight"] = tensors["model.norm.weight"].astype(
        ml_dtypes.bfloat16
    )
    path = _write_checkpoint(_tempdir(self), hf_config, tensors)

    model, _ = hf_checkpoint.load(path)

    params = _params(model)
    np.testing.assert_array_equal(
        params["final_norm.w"], tensors["model.norm.weight"].astype(np.float32)
    )
    np.testing.assert_array_equal(
        params["embedder.input_embedding"], tensors["model.embed_tokens.weight"]
    )


class RoundTripTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("single_file_untied", None, False),
      ("sharded_untied", 40_000, False),
      ("sharded_tied", 40_000, True),
  )
  def test_save_then_load_is_identity(self, max_shard_bytes, tied):
    # The same shapes as LoadTest's checkpoints, to reuse compiled ops.
    config = hf_tiny.qwen3_config(
        use_tied_embedding=tied, num_kv_heads=2 if tied else 1
    )
    model = _random_model(config, 3)
    out = os.path.join(_tempdir(self), "export")

    export.save_checkpoint(model, out, max_shard_bytes=max_shard_bytes)
    loaded, loaded_config = hf_checkpoint.load(out)

    names = os.listdir(out)
    if max_shard_bytes is None:
      self.assertEqual(sorted(names), ["config.json", "model.safetensors"])
    else:
      shards = [n for n in names if n.startswith("model-")]
      self.assertGreater(len(shards), 2)
      for name in shards:
        self.assertLessEqual(
            os.path.getsize(os.path.join(out, name)), max_shard_bytes + 4096
        )
      with open(os.path.join(out, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
      self.assertEqual(sorted(weight_map), sorted(_read_dir_tensors(out)))
    self.assertEqual(loaded_config, config)
    expected, actual = _params(model), _params(loaded)
    self.assertEqual(sorted(actual), sorted(expected))
    for key, value in expected.items():
      np.testing.assert_array_equal(actual[key], value, err_msg=key)
    np.testing.assert_array_equal(
        _logits(loaded, _TOKENS), _logits(model, _TOKENS)
    )

  def test_bfloat16_round_trip_is_bit_exact(self):
    config = hf_tiny.qwen3_config(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    model = _random_model(config, 4)
    out = _tempdir(self)  # An existing empty dir is replaced.

    export.save_checkpoint(model, out)
    loaded, loaded_config = hf_checkpoint.load(out, dtype=jnp.bfloat16)

    with open(os.path.join(out, "config.json")) as f:
      self.assertEqual(json.load(f)["dtype"], "bfloat16")
    self.assertEqual(loaded_config, config)
    expected, actual = _params(model), _params(loaded)
    for key, value in expected.items():
      self.assertEqual(actual[key].dtype, jnp.bfloat16)
      np.testing.assert_array_equal(actual[key], value, err_msg=key)

  def test_moe_round_trip_uses_per_expert_hf_keys(self):
    config = hf_tiny.qwen3_config(
        hidden_dim=32, num_experts=4, num_experts_per_tok=2
    )
    model = _random_model(config, 5)
    out = os.path.join(_tempdir(self), "export")

    export.save_checkpoint(model, out)
    loaded, loaded_config = hf_checkpoint.load(out)

    saved = _read_dir_tensors(out)
    gate = np.asarray(model.layers[1].mlp.gate_proj.get_value())  # [E, D, F]
    np.testing.assert_array_equal(
        saved["model.layers.1.mlp.experts.3.gate_proj.weight"], gate[3].T
    )
    router = np.asarray(model.layers[0].mlp.router.kernel.get_value())
    np.testing.assert_array_equal(
        saved["model.layers.0.mlp.gate.weight"], router.T
    )
    self.assertEqual(loaded_config, config)
    expected, actual = _params(model), _params(loaded)
    for key, value in expected.items():
      np.testing.assert_array_equal(actual[key], value, err_msg=key)

  def test_tokenizer_is_saved_beside_the_weights(self):
    import tokenizers  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top

    vocab = {"<pad>": 0, "<eos>": 1, "a": 2, "b": 3, "<unk>": 4}
    backend = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab, unk_token="<unk>")
    )
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>"
    )
    model = _random_model(hf_tiny.qwen3_config(), 6)
    out = os.path.join(_tempdir(self), "export")

    export.save_checkpoint(model, out, tokenizer=tokenizer)

    reloaded = transformers.AutoTokenizer.from_pretrained(out)
    self.assertEqual(reloaded("a b a")["input_ids"], [2, 3, 2])
    self.assertEqual(reloaded.eos_token_id, 1)
    config = transformers.AutoConfig.from_pretrained(out)
    self.assertEqual(config.model_type, "qwen3")
    self.assertEqual(config.head_dim, _HEAD_DIM)
    self.assertEqual(config.num_key_value_heads, 1)
    self.assertEqual(config.rope_parameters["rope_theta"], 1_000_000)

  def test_crash_before_rename_leaves_no_export(self):
    model = _random_model(hf_tiny.qwen3_config(), 7)
    parent = _tempdir(self)
    out = os.path.join(parent, "export")

    with mock.patch.object(
        export, "_fsync_tree", side_effect=OSError("disk full")
    ):
      with self.assertRaisesRegex(OSError, "disk full"):
        export.save_checkpoint(model, out)

    self.assertEqual(os.listdir(parent), [])

  def test_a_failed_re_export_says_where_the_previous_one_is(self):
    model = _random_model(hf_tiny.qwen3_config(), 7)
    out = os.path.join(_tempdir(self), "export")
    export.export_checkpoint(model, None, out)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with mock.patch.object(export, "_fsync_tree", side_effect=full):
      with self.assertRaisesRegex(
          ValueError,
          rf"^writing the export '{out}' failed: No space left on device; the"
          rf" previous export is in '{out}.previous'; free space there, then"
          " a relaunch with the same workdir resumes from the last checkpoint"
          " and exports again",
      ):
        export.export_checkpoint(model, None, out)
    self.assertFalse(os.path.exists(out))
    self.assertIn("model.safetensors", os.listdir(out + ".previous"))

  @absltest.skipUnless(os.path.exists("/dev/full"), "no /dev/full")
  def test_a_full_disk_under_the_weights_writer_is_one_line(self):
    # safetensors raises its own error, not an OSError, for a failed write:
    # each weights file written to /dev/full, whose writes fail ENOSPC.
    model = _random_model(hf_tiny.qwen3_config(), 7)
    parent = _tempdir(self)
    out = os.path.join(parent, "export")
    real = safetensors_np.save_file
    full = lambda tensors, path, **kw: real(tensors, "/dev/full", **kw)
    with mock.patch.object(export.safetensors_np, "save_file", full):
      with self.assertRaisesRegex(
          ValueError,
          rf"^writing the export '{out}' failed: Error while serializing: .*"
          r"No space left on device \(os error 28\); free space there",
      ):
        export.export_checkpoint(model, None, out)
    self.assertEqual(os.listdir(parent), [])

  def test_refuses_non_empty_output_dir_and_lora(self):
    model = _random_model(hf_tiny.qwen3_config(), 8)
    out = _tempdir(self)
    with open(os.path.join(out, "keep.txt"), "w") as f:
      f.write("old")
    with self.assertRaisesRegex(ValueError, "not an empty directory"):
      export.save_checkpoint(model, out)
    self.assertEqual(os.listdir(out), ["keep.txt"])

    model.layers[0].attn.q_proj.lora_a = nnx.LoRAParam(jnp.zeros((64, 4)))
    with self.assertRaisesRegex(ValueError, "LoRA"):
      export.save_checkpoint(model, os.path.join(out, "x"))


class LlamaTest(absltest.TestCase):

  def test_a_llama_loads_and_exports_as_the_qwen2_it_runs_as(self):
    # Tunix's Qwen2 with zero q/k/v biases (families_test holds it to
    # torch's logits at any theta). The export is that Qwen2: the source's
    # config.json as Qwen2's, its tensors plus the biases, read back as
    # Qwen2 by transformers and to the same parameters by tunix_bd.
    model, config = hf_checkpoint.load(_LLAMA)
    self.assertIsInstance(model, qwen2_lib.Qwen2)
    self.assertEqual(config.rope_theta, 500_000)
    out = os.path.join(_tempdir(self), "export")
    export.save_checkpoint(model, out, source=hf_checkpoint.read_source(_LLAMA))

    with open(os.path.join(_LLAMA, "config.json")) as f:
      source = json.load(f)
    with open(os.path.join(out, "config.json")) as f:
      saved = json.load(f)
    self.assertEqual(saved, hf_config_lib.llama_as_qwen2(source))
    self.assertEqual(saved["model_type"], "qwen2")
    self.assertIsInstance(
        transformers.AutoConfig.from_pretrained(out),
        transformers.Qwen2Config,
    )
    tensors, source_tensors = _read_dir_tensors(out), _read_dir_tensors(_LLAMA)
    for key, value in tensors.items():
      if key.endswith("_proj.bias"):
        np.testing.assert_array_equal(value, 0, err_msg=key)
      else:
        np.testing.assert_array_equal(value, source_tensors.pop(key), key)
    self.assertEmpty(source_tensors)
    reloaded, reloaded_config = hf_checkpoint.load(out)
    self.assertEqual(reloaded_config, config)
    want = _params(model)
    for key, value in _params(reloaded).items():
      np.testing.assert_array_equal(value, want[key], err_msg=key)


class LoadErrorTest(parameterized.TestCase):

  def _checkpoint(self, tensors=None, hf_config=None):
    return _write_checkpoint(
        _tempdir(self),
        hf_config or hf_tiny.qwen3_hf_config(tied=False, kv_heads=1),
        tensors or _hf_tensors(tied=False, kv_heads=1),
    )

  def test_missing_directory(self):
    path = os.path.join(_tempdir(self), "nope")
    with self.assertRaisesRegex(ValueError, "does not exist"):
      hf_checkpoint.load(path)

  def test_missing_config(self):
    path = self._checkpoint()
    os.remove(os.path.join(path, "config.json"))
    with self.assertRaisesRegex(
        ValueError,
        "is not a Hugging Face checkpoint directory: config.json not found",
    ):
      hf_checkpoint.load(path)

  def test_no_safetensors(self):
    path = self._checkpoint()
    os.remove(os.path.join(path, "model.safetensors"))
    with self.assertRaisesRegex(ValueError, "No \\*.safetensors"):
      hf_checkpoint.load(path)

  def test_unsupported_model_type(self):
    hf_config = hf_tiny.qwen3_hf_config(tied=False, kv_heads=1)
    hf_config["model_type"] = "mistral"
    with self.assertRaisesRegex(ValueError, "model_type='mistral'"):
      hf_checkpoint.load(self._checkpoint(hf_config=hf_config))

  def test_wrong_shape_names_tensor_and_both_shapes(self):
    tensors = _hf_tensors(tied=False, kv_heads=1)
    key = "model.layers.1.self_attn.k_proj.weight"
    tensors[key] = np.zeros((2 * _HEAD_DIM, _EMBED), np.float32)
    with self.assertRaisesRegex(
        ValueError, rf"'{key}'.*\[64, 64\].*\[32, 64\]"
    ):
      hf_checkpoint.load(self._checkpoint(tensors=tensors))

  def test_missing_tensor(self):
    tensors = _hf_tensors(tied=False, kv_heads=1)
    del tensors["model.layers.0.mlp.up_proj.weight"]
    with self.assertRaisesRegex(
        ValueError, "missing tensor 'model.layers.0.mlp.up_proj.weight'"
    ):
      hf_checkpoint.load(self._checkpoint(tensors=tensors))

  def test_untied_config_without_lm_head(self):
    tensors = _hf_tensors(tied=True, kv_heads=1)
    with self.assertRaisesRegex(ValueError, "missing tensor 'lm_head.weight'"):
      hf_checkpoint.load(self._checkpoint(tensors=tensors))

  def test_unexpected_tensor(self):
    tensors = _hf_tensors(tied=False, kv_heads=1)
    tensors["model.layers.0.self_attn.q_proj.bias"] = np.zeros(64, np.float32)
    with self.assertRaisesRegex(
        ValueError, "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"
    ):
      hf_checkpoint.load(self._checkpoint(tensors=tensors))

  def test_stray_shard_not_in_index(self):
    model = _random_model(hf_tiny.qwen3_config(), 9)
    out = os.path.join(_tempdir(self), "export")
    export.save_checkpoint(model, out, max_shard_bytes=40_000)
    safetensors_np.save_file(
        {"x": np.zeros(2, np.float32)}, os.path.join(out, "old.safetensors")
    )
    with self.assertRaisesRegex(ValueError, "old.safetensors"):
      hf_checkpoint.load(out)

  @parameterized.parameters(
      "config.json", "model.safetensors.index.json", "generation_config.json"
  )
  def test_a_file_that_is_not_json_names_itself_and_the_fix(self, name):
    model = _random_model(hf_tiny.qwen3_config(), 9)
    out = os.path.join(_tempdir(self), "export")
    export.save_checkpoint(model, out, max_shard_bytes=40_000)  # With an index.
    with open(os.path.join(out, name), "w") as f:
      f.write('{"cut short')
    with self.assertRaisesRegex(
        ValueError,
        rf"^{os.path.join(out, name)} is not valid JSON .*; copy or download"
        " the checkpoint again",
    ):
      hf_checkpoint.read_source(out)  # Reads all three.


if __name__ == "__main__":
  absltest.main()
