# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.checkpoint_digest: content, not paths."""

import contextlib
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import tracemalloc

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from safetensors import numpy as safetensors_np
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.models import checkpoint_digest
from tunix_bd.models import export
from tunix_bd.models import hf_checkpoint
from tunix_bd_tests import test_common


def _sha256_file(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _reference_weights_digest(directory: str) -> str:
  """Brute force: every tensor loaded whole by the safetensors library."""
  tensors = {}
  for name in os.listdir(directory):
    if name.endswith(".safetensors"):
      tensors.update(safetensors_np.load_file(os.path.join(directory, name)))
  digest = hashlib.sha256()
  for key in sorted(tensors):
    value = tensors[key]
    dtype = {"float32": "F32", "uint8": "U8"}[value.dtype.name]
    record = [key, dtype, list(value.shape), value.nbytes]
    digest.update(json.dumps(record).encode() + b"\n")
    digest.update(value.tobytes())
  return digest.hexdigest()


def _write_sparse_safetensors(path: str, num_bytes: int) -> None:
  """One uint8 tensor of `num_bytes` zeros, as a sparse file."""
  entry = {"dtype": "U8", "shape": [num_bytes], "data_offsets": [0, num_bytes]}
  header = json.dumps({"big": entry}).encode()
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header)
    f.truncate(8 + len(header) + num_bytes)


class ExportDigestTest(parameterized.TestCase):
  """Digests of real exports of a tiny Qwen3 with its tokenizer."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = absltest.get_default_test_tmpdir()
    cls.model = test_common.tiny_qwen3(vocab_size=64, seed=1)
    cls.tokenizer = tokenizer_lib.build_char_tokenizer()
    cls.whole = os.path.join(cls.root, "whole")
    cls.sharded = os.path.join(cls.root, "sharded")
    for directory, max_shard_bytes in ((cls.whole, None), (cls.sharded, 9000)):
      shutil.rmtree(directory, ignore_errors=True)
      export.save_checkpoint(
          cls.model,
          directory,
          tokenizer=cls.tokenizer,
          max_shard_bytes=max_shard_bytes,
      )
    cls.digest = checkpoint_digest.digest_checkpoint(cls.whole)

  def copy(self, source: str | None = None) -> str:
    target = os.path.join(self.create_tempdir().full_path, "copy")
    shutil.copytree(source or self.whole, target)
    return target

  def test_parts_match_a_brute_force_reference(self):
    config = os.path.join(self.whole, checkpoint_digest.CONFIG_FILE)
    self.assertEqual(self.digest.config, _sha256_file(config))
    self.assertEqual(self.digest.weights, _reference_weights_digest(self.whole))
    tokenizer = hashlib.sha256()
    names = sorted(
        set(os.listdir(self.whole)) & set(checkpoint_digest.TOKENIZER_FILES)
    )
    # The char tokenizer's files are what save_pretrained writes, all hashed.
    self.assertEqual(
        names,
        ["chat_template.jinja", "tokenizer.json", "tokenizer_config.json"],
    )
    for name in names:
      path = os.path.join(self.whole, name)
      record = [name, os.path.getsize(path)]
      tokenizer.update(json.dumps(record).encode() + b"\n")
      with open(path, "rb") as f:
        tokenizer.update(f.read())
    self.assertEqual(self.digest.tokenizer, tokenizer.hexdigest())
    self.assertIsNone(self.digest.settings)
    self.assertEqual(
        self.digest.digest,
        hashlib.sha256(
            json.dumps(self.digest.parts(), sort_keys=True).encode()
        ).hexdigest(),
    )
    self.assertRegex(self.digest.digest, r"^[0-9a-f]{64}$")

  def test_file_names_agree_with_the_loader_and_the_settings(self):
    self.assertEqual(checkpoint_digest.SETTINGS_FILE, bd_config.SETTINGS_FILE)

  def test_same_content_under_another_path_or_sharding_is_the_same(self):
    self.assertEqual(
        checkpoint_digest.digest_checkpoint(self.copy()), self.digest
    )
    shards = [n for n in os.listdir(self.sharded) if n.endswith(".safetensors")]
    self.assertGreater(len(shards), 2)
    self.assertEqual(
        checkpoint_digest.digest_checkpoint(self.sharded), self.digest
    )

  def test_symlinked_files_are_their_targets(self):
    # The Hugging Face hub cache links a snapshot's files to shared blobs.
    snapshot = self.create_tempdir().full_path
    for name in os.listdir(self.sharded):
      os.symlink(os.path.join(self.sharded, name), os.path.join(snapshot, name))
    self.assertEqual(checkpoint_digest.digest_checkpoint(snapshot), self.digest)

  def test_header_layout_and_metadata_are_not_content(self):
    directory = self.copy()
    path = os.path.join(directory, hf_checkpoint.WEIGHTS_FILE)
    tensors = safetensors_np.load_file(path)
    reordered = dict(reversed(list(tensors.items())))
    safetensors_np.save_file(reordered, path, metadata={"note": "resaved"})
    self.assertEqual(
        checkpoint_digest.digest_checkpoint(directory), self.digest
    )

  def test_each_part_changes_alone(self):
    # One weight byte.
    weights = self.copy()
    path = os.path.join(weights, hf_checkpoint.WEIGHTS_FILE)
    tensors = safetensors_np.load_file(path)
    tensors["model.norm.weight"].view(np.uint8)[5] ^= 1
    safetensors_np.save_file(tensors, path, metadata={"format": "pt"})
    # The config, a tokenizer file, block-diffusion settings.
    config = self.copy()
    with open(os.path.join(config, "config.json"), "a") as f:
      f.write("\n")
    tokenizer = self.copy()
    with open(os.path.join(tokenizer, "chat_template.jinja"), "a") as f:
      f.write(" ")
    settings = self.copy()
    bd_config.save_settings(
        bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3),
        settings,
    )
    for directory, part in (
        (weights, "weights"),
        (config, "config"),
        (tokenizer, "tokenizer"),
        (settings, "settings"),
    ):
      digest = checkpoint_digest.digest_checkpoint(directory)
      changed = [
          k for k, v in digest.parts().items() if v != self.digest.parts()[k]
      ]
      self.assertEqual(changed, [part])
      self.assertNotEqual(digest.digest, self.digest.digest)

  def test_needs_no_array_library(self):
    """The digest runs where JAX, NumPy and safetensors cannot be imported.

    The tensor's dtype is one no array library reads, too.
    """
    directory = self.copy()
    path = os.path.join(directory, "extra.safetensors")
    header = json.dumps(
        {"odd": {"dtype": "X7", "shape": [3], "data_offsets": [0, 5]}}
    ).encode()
    with open(path, "wb") as f:
      f.write(struct.pack("<Q", len(header)) + header + b"abcde")
    expected = checkpoint_digest.digest_checkpoint(directory).digest
    script = textwrap.dedent("""
        import importlib.abc, sys
        BLOCKED = ("jax", "jaxlib", "numpy", "safetensors", "ml_dtypes",
                   "flax", "tunix", "transformers", "torch")
        class Block(importlib.abc.MetaPathFinder):
          def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
              raise ImportError(f"{name} is blocked")
        sys.meta_path.insert(0, Block())
        from tunix_bd.models import checkpoint_digest
        print(checkpoint_digest.digest_checkpoint(sys.argv[1]).digest)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script, directory],
        capture_output=True,
        text=True,
        timeout=60,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout.strip(), expected)

  def test_command_line_prints_the_digest(self):
    proc = subprocess.run(
        [sys.executable, "-m", checkpoint_digest.__name__, self.whole],
        capture_output=True,
        text=True,
        timeout=60,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertEqual(proc.stdout, f"{self.digest.digest}  {self.whole}\n")


class StreamingTest(absltest.TestCase):

  def test_memory_stays_within_a_chunk_on_a_large_tensor(self):
    directory = self.create_tempdir().full_path
    size = 64 << 20
    _write_sparse_safetensors(
        os.path.join(directory, "model.safetensors"), size
    )
    with open(os.path.join(directory, "config.json"), "w") as f:
      f.write("{}")
    chunk = 1 << 20
    tracemalloc.start()
    try:
      digest = checkpoint_digest.digest_checkpoint(directory, chunk_bytes=chunk)
      _, peak = tracemalloc.get_traced_memory()
    finally:
      tracemalloc.stop()
    # One chunk buffer plus small change; reading the tensor whole would
    # allocate 64 chunks.
    self.assertLess(peak, 2 * chunk)
    # Chunking is invisible in the result, even for a size that does not
    # divide the tensor.
    for other in (999_983, checkpoint_digest.DEFAULT_CHUNK_BYTES):
      self.assertEqual(
          checkpoint_digest.digest_checkpoint(directory, chunk_bytes=other),
          digest,
      )
    record = json.dumps(["big", "U8", [size], size]).encode() + b"\n"
    zeros = hashlib.sha256(record)
    for _ in range(size // chunk):
      zeros.update(bytes(chunk))
    self.assertEqual(digest.weights, zeros.hexdigest())


class ErrorTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.directory = self.create_tempdir().full_path
    with open(os.path.join(self.directory, "config.json"), "w") as f:
      f.write("{}")

  def write(self, name: str, content: bytes) -> str:
    path = os.path.join(self.directory, name)
    with open(path, "wb") as f:
      f.write(content)
    return path

  def header(self, entries: dict, data: bytes = b"") -> bytes:
    header = json.dumps(entries).encode()
    return struct.pack("<Q", len(header)) + header + data

  def test_missing_directory_config_and_weights(self):
    missing = os.path.join(self.directory, "nope")
    with self.assertRaisesRegex(ValueError, "nope does not exist"):
      checkpoint_digest.digest_checkpoint(missing)
    with self.assertRaisesRegex(ValueError, r"No \*\.safetensors"):
      checkpoint_digest.digest_checkpoint(self.directory)
    os.remove(os.path.join(self.directory, "config.json"))
    with self.assertRaisesRegex(ValueError, "config.json not found"):
      checkpoint_digest.digest_checkpoint(self.directory)

  @parameterized.named_parameters(
      ("empty", b"", "bad header length"),
      ("huge_header_length", struct.pack("<Q", 1 << 40) + b"{}", "bad header"),
      ("not_json", struct.pack("<Q", 3) + b"{x}", "not JSON"),
      ("not_a_dict", struct.pack("<Q", 2) + b"[]", "not a dict"),
  )
  def test_not_safetensors(self, content, message):
    path = self.write("model.safetensors", content)
    with self.assertRaisesRegex(ValueError, f"{path}.*{message}"):
      checkpoint_digest.digest_checkpoint(self.directory)

  def test_a_truncated_file_names_itself_and_the_tensor_past_its_end(self):
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    path = self.write("model.safetensors", self.header({"w": entry}, b"1234"))
    with self.assertRaisesRegex(
        ValueError, f"^{path} is truncated: tensor 'w' ends at byte 8 .* 4"
    ):
      checkpoint_digest.check_weight_files(self.directory)

  @parameterized.named_parameters(
      ("reversed", [4, 2]),
      ("negative", [-1, 2]),
      ("not_ints", [0.0, 2]),
      ("bools", [False, True]),
  )
  def test_offsets_outside_the_data(self, offsets):
    entry = {"dtype": "F32", "shape": [1], "data_offsets": offsets}
    self.write("model.safetensors", self.header({"w": entry}, b"1234"))
    with self.assertRaisesRegex(ValueError, "tensor 'w' has an invalid"):
      checkpoint_digest.digest_checkpoint(self.directory)

  def test_tensor_in_two_files(self):
    entry = {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}
    self.write("a.safetensors", self.header({"w": entry}, b"1"))
    self.write("b.safetensors", self.header({"w": entry}, b"1"))
    with self.assertRaisesRegex(ValueError, "'w' is in both a.safetensors"):
      checkpoint_digest.digest_checkpoint(self.directory)

  def test_command_line_mistakes_are_one_line(self):
    missing = os.path.join(self.directory, "nope")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      self.assertEqual(checkpoint_digest.main([missing]), 1)
      self.assertEqual(checkpoint_digest.main([]), 2)
    self.assertEqual(
        stderr.getvalue().splitlines(),
        [
            (
                f"checkpoint_digest: error: Checkpoint directory {missing} does"
                " not exist."
            ),
            "usage: python -m tunix_bd.models.checkpoint_digest DIRECTORY ...",
        ],
    )

  @parameterized.parameters(0, -4, 1.5, True)
  def test_chunk_bytes(self, chunk_bytes):
    with self.assertRaisesRegex(ValueError, "chunk_bytes"):
      checkpoint_digest.digest_checkpoint(
          self.directory, chunk_bytes=chunk_bytes
      )


if __name__ == "__main__":
  absltest.main()
