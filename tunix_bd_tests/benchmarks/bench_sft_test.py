# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`bench_sft`: the report's structure, not its timing; bad configs."""

from benchmarks import plugin as benchmarks_plugin
import contextlib
import io
import json
import os

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from benchmarks import sft_step
from benchmarks.recipes import bench_sft
from tunix_bd.models import from_scratch


def _tiny(output: str):
  config = benchmarks_plugin.get_config("bench_sft", "tiny")
  config.output = output
  config.model.update(from_scratch.TINY_SHAPE)
  config.bench.update(num_steps=1, warmup_steps=1)
  return config


class SmokeTest(absltest.TestCase):

  def test_every_variant_is_timed_and_written(self):
    output = os.path.join(self.create_tempdir().full_path, "a", "sft.json")
    config = _tiny(output)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      report = bench_sft.run(config)
    self.assertEqual(tuple(report), sft_step.VARIANTS)
    self.assertEqual(report["ar"]["throughput_vs_ar"], 1.0)
    for row in report.values():
      self.assertGreater(row["tokens_per_s"], 0)
      self.assertGreater(row["peak_bytes"], 0)
      self.assertGreater(row["planned_bytes"], 0)
      self.assertGreater(row["compile_s"], 0)
      self.assertBetween(row["real_token_share"], 0.3, 1.0)
      self.assertIn("mfu_real_tokens", row)
    # The clean-context step runs the model over twice the length.
    self.assertGreater(
        report["bd_clean_context"]["peak_bytes"], report["ar"]["peak_bytes"]
    )
    lines = printed.getvalue().splitlines()
    self.assertIn("batch 4 x 56 tokens", lines[0])
    self.assertEqual([l.split()[0] for l in lines[3:]], list(sft_step.VARIANTS))
    with open(output) as f:
      self.assertEqual(json.load(f), json.loads(json.dumps(report)))


class PackingTest(absltest.TestCase):

  def test_packed_rows_raise_the_share_of_real_tokens(self):
    # Rows of 112 tokens hold 3 of the tiny task's examples, or 1 unpacked.
    shares = {}
    for packing in (False, True):
      config = _tiny("")
      config.data.update(max_length=112, packing=packing)
      _, batch, _ = bench_sft.prepare(bench_sft.validate(config).settings)
      segment_ids = np.asarray(batch.diffusion["batch"].segment_ids)
      self.assertEqual(segment_ids.max(), 3 if packing else 1)
      self.assertEqual(batch.real_token_share, np.mean(segment_ids > 0))
      # The AR step keeps the packed documents apart too.
      mask = np.asarray(batch.ar["attention_mask"])
      same = segment_ids[:, :, None] == segment_ids[:, None, :]
      self.assertFalse((mask & ~same).any())
      shares[packing] = batch.real_token_share
    self.assertGreater(shares[True], 2 * shares[False])


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("variants", dict(bench=dict(variants=("bd",))), r"bench\.variants"),
      ("steps", dict(bench=dict(num_steps=0)), r"bench\.num_steps"),
      ("block", dict(bd=dict(block_size=0)), r"bd\.block_size"),
      ("shape", dict(model=dict(num_kv_heads=3)), r"model\.num_heads"),
      ("vocab", dict(model=dict(vocab_size=10)), r"model\.vocab_size=10"),
      ("data", dict(data=dict(eval="x.jsonl")), r"data\.eval"),
      ("key", dict(bench=dict(batch=2)), r"unknown bench config keys"),
  )
  def test_fails_closed_before_any_compute(self, overrides, message):
    output = os.path.join(self.create_tempdir().full_path, "out", "s.json")
    config = _tiny(output)
    for key, value in overrides.items():
      with config.unlocked():
        config[key].update(value)
    with self.assertRaisesRegex(ValueError, message):
      bench_sft.run(config)
    self.assertFalse(os.path.exists(os.path.dirname(output)))


if __name__ == "__main__":
  absltest.main()
