# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for benchmarks/peer.py and bench_decode's peer column.

The peer driver needs torch, which CI does not have: its output format is
tested against `testdata/peer_driver_sample.jsonl`, a recorded run of
`peer_driver.py` on the `fast_dllm_v2_tiny` fixture (their `generate`,
sub-block 4, block cache, threshold 0.9, budget 20), whose tokens and
forward counts must be the fixture oracle's `generate_sb4_cache` run. With
`TUNIX_BD_PEER_PYTHON` (an interpreter with torch and transformers 4.53.1)
and `TUNIX_BD_PEER_CODE` (Fast_dLLM_v2_7B's modeling files) set, the driver
itself is run on the fixture too.
"""

import json
import os
import sys
import tempfile

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import plugin as benchmarks_plugin
import ml_collections
import numpy as np

from benchmarks import decode_table
from benchmarks import peer as peer_lib
from benchmarks.recipes import bench_decode

_DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")
_FIXTURES = os.path.join(_DATA, "bd_formats")
_FAST = os.path.join(_FIXTURES, "fast_dllm_v2_tiny")
_SDAR = os.path.join(_FIXTURES, "sdar_tiny")
_SAMPLE = os.path.join(_DATA, "peer_driver_sample.jsonl")
_ORACLE_RUN = "generate_sb4_cache"


def _oracle():
  return np.load(os.path.join(_FAST, "oracle.npz"))


def _rows(padded, lengths):
  return [row[:n].tolist() for row, n in zip(padded, lengths)]


def _code_dir(files=peer_lib.CODE_FILES["fast_dllm_v2"]):
  code = tempfile.mkdtemp()
  for name in files:
    with open(os.path.join(code, name), "w") as f:
      f.write("")
  return code


def _settings(**overrides):
  values = dict(python=sys.executable, code=_code_dir())
  values.update(overrides)
  return peer_lib.from_section(ml_collections.ConfigDict(values))


class SettingsTest(parameterized.TestCase):

  def test_the_default_section_is_off(self):
    section = benchmarks_plugin.get_config("bench_decode", "peer").peer
    self.assertFalse(peer_lib.from_section(section).enabled)

  def test_a_usable_section(self):
    settings = _settings(small_block_size=4)
    self.assertTrue(settings.enabled)
    self.assertEqual(
        peer_lib.check_checkpoint(settings, _FAST, "k"),
        ("modeling.py", "configuration.py"),
    )

  @parameterized.named_parameters(
      ("code_without_python", dict(python="", code="x"), "peer.code"),
      ("missing_python", dict(python="/no/such/python"), "peer.python"),
      ("python_not_executable", dict(python=_SAMPLE), "peer.python"),
      ("code_not_a_directory", dict(code=_SAMPLE), "peer.code"),
      ("negative_sub_block", dict(small_block_size=-1), "small_block_size"),
      ("cache_not_bool", dict(use_block_cache=1), "use_block_cache"),
      ("unknown_key", dict(threads=2), "threads"),
  )
  def test_bad_settings_fail_naming_the_key(self, overrides, key):
    with self.assertRaisesRegex(ValueError, key):
      _settings(**overrides)

  def test_an_sdar_checkpoint_is_refused_naming_the_key(self):
    with self.assertRaisesRegex(ValueError, r"bench\.key.*sdar.*no greedy"):
      peer_lib.check_checkpoint(_settings(), _SDAR, "bench.key")

  def test_a_directory_in_no_format_is_refused(self):
    with self.assertRaisesRegex(ValueError, "bench.key.*no format"):
      peer_lib.check_checkpoint(_settings(), tempfile.mkdtemp(), "bench.key")

  def test_missing_modeling_files_name_peer_code(self):
    settings = _settings(code=_code_dir(["modeling.py"]))
    with self.assertRaisesRegex(ValueError, r"peer\.code.*configuration\.py"):
      peer_lib.check_checkpoint(settings, _FAST, "k")

  def test_a_sub_block_must_divide_the_block(self):
    with self.assertRaisesRegex(ValueError, "small_block_size=3.*k's block"):
      peer_lib.check_checkpoint(_settings(small_block_size=3), _FAST, "k")


class DriverOutputTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    with open(_SAMPLE) as f:
      self.ready_line, self.reply_line = f.read().splitlines()

  def test_the_recorded_run_is_the_oracles(self):
    oracle = _oracle()
    reply = peer_lib.parse_reply(self.reply_line, 3)
    self.assertEqual(
        reply.tokens,
        _rows(oracle[f"{_ORACLE_RUN}_tokens"], oracle[f"{_ORACLE_RUN}_lens"]),
    )
    np.testing.assert_array_equal(
        reply.forwards, oracle[f"{_ORACLE_RUN}_forwards"]
    )
    self.assertGreater(reply.seconds, 0)
    ready = peer_lib.parse_ready(self.ready_line)
    self.assertEqual(ready["small_block_size"], 4)
    self.assertTrue(ready["use_block_cache"])
    meta = json.loads(str(oracle["meta"]))
    self.assertEqual(
        ready["code_sha256"],
        {
            k: v
            for k, v in meta["reference_files"].items()
            if k in peer_lib.CODE_FILES["fast_dllm_v2"]
        },
    )

  def test_a_reply_with_the_wrong_rows_fails(self):
    with self.assertRaisesRegex(RuntimeError, "expected 2 rows"):
      peer_lib.parse_reply(self.reply_line, 2)

  def test_an_error_line_fails_with_its_message(self):
    line = json.dumps({"error": "OSError: no weights"})
    for parse in (peer_lib.parse_ready, lambda x: peer_lib.parse_reply(x, 1)):
      with self.assertRaisesRegex(RuntimeError, "no weights"):
        parse(line)

  def test_no_json_fails(self):
    with self.assertRaisesRegex(RuntimeError, "ready line"):
      peer_lib.parse_ready("Traceback (most recent call last):")
    with self.assertRaisesRegex(RuntimeError, "no ready line"):
      peer_lib.parse_ready(self.reply_line)

  def test_completion_stops_before_the_stop_and_at_the_budget(self):
    self.assertEqual(peer_lib.completion([5, 6, 2, 7], 2, 10), [5, 6])
    self.assertEqual(peer_lib.completion([5, 6, 7, 8], 2, 3), [5, 6, 7])
    self.assertEqual(peer_lib.completion([2, 5], 2, 3), [])

  def test_agreement_against_brute_force(self):
    rng = np.random.default_rng(0)
    theirs = [
        rng.integers(0, 3, rng.integers(0, 6)).tolist() for _ in range(50)
    ]
    ours = [rng.integers(0, 3, rng.integers(0, 6)).tolist() for _ in range(50)]
    got = peer_lib.agreement(theirs, ours)
    prefixes = []
    for t, o in zip(theirs, ours):
      n = max([k for k in range(min(len(t), len(o)) + 1) if t[:k] == o[:k]])
      prefixes.append(n / max(len(o), 1))
    self.assertAlmostEqual(got["common_prefix"], np.mean(prefixes))
    self.assertAlmostEqual(
        got["same_tokens"], np.mean([t == o for t, o in zip(theirs, ours)])
    )

  def test_a_driver_that_cannot_start_reports_its_stderr(self):
    code = tempfile.mkdtemp()
    script = os.path.join(code, "python")
    with open(script, "w") as f:
      f.write("#!/bin/sh\necho 'ModuleNotFoundError: torch' >&2\n")
    os.chmod(script, 0o755)
    settings = _settings(python=script, code=_code_dir())
    with self.assertRaisesRegex(RuntimeError, "(?s)ready line.*torch"):
      peer_lib.Peer(
          settings,
          _FAST,
          block_size=8,
          mask_id=400,
          threshold=0.9,
          max_new_tokens=20,
          stop_id=2,
          key="k",
      )


class TableTest(absltest.TestCase):

  def test_the_peer_row_and_its_comparison_are_printed(self):
    def cell(tokens_per_s, tpf):
      return dict(
          tokens_per_s=tokens_per_s,
          speedup_vs_ar=1.0,
          speedup_vs_ar_loop=1.0,
          ideal_vs_ar_loop=None,
          forward_share=None,
          tokens_per_forward=tpf,
          tpf_of_ceiling=None,
          exact_match=None,
          new_tokens=10,
      )

    cells = {m: cell(100.0, 1.0) for m in ("ar", "ar_loop", "bd_cache_free")}
    cells["bd_cached"] = cell(300.0, 2.5)
    cells["peer"] = cell(40.0, 1.6)
    ready = json.loads(open(_SAMPLE).readline())["ready"]
    results = {
        "workloads": {
            "w": {
                "max_new_tokens": 16,
                "block_size": 8,
                "cells": {"batch=1": cells},
                "forward_seconds": {},
                "tpf_ceiling": {},
                "peer": {**ready, "exchange_overhead": 0.01},
                "peer_agreement": {
                    "batch=1": {"same_tokens": 0.25, "common_prefix": 0.5}
                },
            }
        }
    }
    lines = decode_table.format_table(results, "t").splitlines()
    self.assertTrue(
        any(line.split()[3:5] == ["peer", "40.0"] for line in lines)
    )
    self.assertIn(
        "  w batch=1: bd_cached 300.0 tokens/s vs peer 40.0 (x7.50), tok/fwd"
        " 2.50 vs 1.60; the same tokens in 25% of rows, agreeing prefix 50%"
        " of ours",
        lines,
    )
    self.assertTrue(any("sub-block 4" in line for line in lines))


class BenchDecodeValidationTest(parameterized.TestCase):
  """`bench_decode.run` refuses a bad peer setup before any compute."""

  def _config(self, bd_checkpoint=_FAST, **overrides):
    config = benchmarks_plugin.get_config("bench_decode", "peer")
    config.peer.python = sys.executable
    config.peer.code = _code_dir()
    config.workload_settings.peer.ar_checkpoint = bd_checkpoint
    config.workload_settings.peer.bd_checkpoint = bd_checkpoint
    config.update(overrides)
    return config

  def test_the_rule_must_be_the_threshold(self):
    with self.assertRaisesRegex(ValueError, "rule='factor'"):
      bench_decode.run(self._config(rule="factor"))

  def test_a_random_workload_has_no_peer(self):
    config = self._config(workloads=("realistic",))
    with self.assertRaisesRegex(ValueError, "workloads: 'realistic'"):
      bench_decode.run(config)

  def test_the_checkpoint_must_be_in_the_peers_format(self):
    with self.assertRaisesRegex(
        ValueError, r"workload_settings\.peer\.bd_checkpoint.*sdar"
    ):
      bench_decode.run(self._config(_SDAR))


@absltest.skipUnless(
    os.environ.get("TUNIX_BD_PEER_PYTHON")
    and os.environ.get("TUNIX_BD_PEER_CODE"),
    "needs TUNIX_BD_PEER_PYTHON (torch, transformers 4.53.1) and"
    " TUNIX_BD_PEER_CODE (Fast_dLLM_v2_7B's modeling files)",
)
class DriverTest(absltest.TestCase):

  def test_the_driver_decodes_the_fixture_as_the_oracle(self):
    settings = _settings(
        python=os.environ["TUNIX_BD_PEER_PYTHON"],
        code=os.environ["TUNIX_BD_PEER_CODE"],
        small_block_size=4,
    )
    oracle = _oracle()
    prompts = _rows(oracle["decode_prompts"], oracle["decode_prompt_lens"])
    with peer_lib.Peer(
        settings,
        _FAST,
        block_size=8,
        mask_id=400,
        threshold=0.9,
        max_new_tokens=20,
        stop_id=2,
        key="k",
    ) as runner:
      reply = runner.decode(prompts)
    self.assertEqual(
        reply.tokens,
        _rows(oracle[f"{_ORACLE_RUN}_tokens"], oracle[f"{_ORACLE_RUN}_lens"]),
    )
    np.testing.assert_array_equal(
        reply.forwards, oracle[f"{_ORACLE_RUN}_forwards"]
    )


if __name__ == "__main__":
  absltest.main()
