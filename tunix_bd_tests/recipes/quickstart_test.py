# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""End-to-end: quickstart, generate and benchmarks via the CLI.

One tiny quickstart (AR teacher -> SFT -> evaluation) runs through the real
`tunix` host's `main`; the other recipes then run on its exports the same
way, in this process, reusing its compiled programs, and README.md's
"Decoding from Python" snippet runs as written in a fresh interpreter (a
persistent XLA cache lets it reuse compiled programs too). LoRA SFT's
merged export: models/hf_roundtrip_test.py.
"""

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys

from absl.testing import absltest
from benchmarks import plugin as benchmarks_plugin

from tunix_bd import config_files
from tunix_bd.cli import main
from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.models import checkpoint_digest
from tunix_bd.recipes import quickstart
from tunix_bd_tests import readme


def _strings(value):
  """Every string in a JSON value, keys included."""
  if isinstance(value, dict):
    for key, item in value.items():
      yield key
      yield from _strings(item)
  elif isinstance(value, list):
    for item in value:
      yield from _strings(item)
  elif isinstance(value, str):
    yield value


class QuickstartTasksTest(absltest.TestCase):

  def test_tasks_are_checked_first_and_every_stage_trains_on_them(self):
    config = config_files.get_config("quickstart", "tiny")
    config.workdir = os.path.join(self.create_tempdir().full_path, "run")
    config.tasks = ("sort", "nope")
    with self.assertRaisesRegex(
        ValueError, r"^tasks has unknown task\(s\) \['nope'\]; "
    ):
      quickstart.validate(config)
    self.assertFalse(os.path.exists(config.workdir))
    config.tasks = ("count",)
    for stage in quickstart._stage_configs(config):
      self.assertEqual(tuple(stage.data.tasks), ("count",))


def _run_recipe(recipe: str, *overrides: str) -> str:
  """`tunix run --plugin tunix_bd RECIPE OVERRIDES...`; returns its stdout."""
  stdout = io.StringIO()
  with contextlib.redirect_stdout(stdout):
    status = main.main(["run", "--plugin", "tunix_bd", recipe, *overrides])
  if status:
    raise AssertionError(f"{recipe} exited {status}:\n{stdout.getvalue()}")
  return stdout.getvalue()


class RealisticTwinTest(absltest.TestCase):
  """`quickstart.py:realistic_tiny`, the CPU-size twin of the chip's chain:
  the `trace` task end to end, the report's realistic-size fields, then
  OPD and GRPO (`realistic_tiny`) on its exports."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = absltest.get_default_test_tmpdir()
    cls.workdir = os.path.join(cls.root, "realistic_tiny")
    cls.text = _run_recipe(
        "quickstart.py:realistic_tiny", f"--config.workdir={cls.workdir}"
    )

  def test_opd_and_grpo_report_final_answers_before_and_after(self):
    exports = os.path.join(self.workdir, "{}", "export")
    opd_dir, grpo_dir = (os.path.join(self.root, n) for n in ("opd", "grpo"))
    _run_recipe(
        "opd.py:realistic_tiny",
        f"--config.workdir={opd_dir}",
        f"--config.model.student={exports.format('sft')}",
        f"--config.model.teacher={exports.format('ar_pretrain')}",
    )
    with open(os.path.join(opd_dir, "report.json")) as f:
      opd = json.load(f)
    # The trace task's answers state results: scored on them too.
    self.assertContainsSubset(
        {"exact_match@0.9", "final_answer@0.9", "tokens_per_forward@0.9"},
        set(opd["before"]) & set(opd["after"]),
    )
    policy = exports.format("sft")
    _run_recipe(
        "grpo.py:realistic_tiny",
        f"--config.workdir={grpo_dir}",
        f"--config.model.checkpoint={policy}",
        f"--config.model.reference={policy}",
    )
    with open(os.path.join(grpo_dir, "report.json")) as f:
      grpo = json.load(f)
    self.assertEqual(
        [r["metric"] for r in grpo["held_out"]],
        [
            "exact_match@0.9",
            "final_answer@0.9",
            "tokens_per_forward@0.9",
            "sampled_exact_match",
        ],
    )
    # The forwards-aware reward's speed term was logged beside the others.
    with open(os.path.join(grpo_dir, "metrics.jsonl")) as f:
      self.assertIn("rewards/train/speed", f.read())

  def test_the_chain_reports_final_answers_batches_and_sizes(self):
    workdir, text = self.workdir, self.text
    with open(os.path.join(workdir, "report.json")) as f:
      rows = json.load(f)["rows"]
    self.assertEqual(
        [r["method"] for r in rows],
        ["AR (Tunix Sampler)", "AR, one-token blocks", "BD threshold 0.9"],
    )
    tiny = config_files.get_config("ar_pretrain", "realistic_tiny").model
    converted = config_files.get_config("sft", "realistic_tiny").model
    for row in rows:
      # Decoded as the conversion computed.
      self.assertEqual(row["dtype"], converted.dtype)
      # The final answer is a part of the whole: it scores at least as often.
      self.assertBetween(row["exact_match"], 0.0, row["final_answer"])
      self.assertLessEqual(row["final_answer"], 1.0)
      self.assertEqual(set(row["tokens_per_s_at"]), {"2"})
      self.assertGreater(row["batch1_ms_per_forward"], 0.0)
      self.assertBetween(row["mean_answer_tokens"], 0.0, 200.0)
      # A tiny Qwen3 of the variant's shape, its conversion one mask row
      # larger at most.
      self.assertBetween(
          row["num_params"],
          tiny.embed_dim * 128,
          tiny.embed_dim * 128 * 2 + 100_000,
      )
    self.assertIn("8 eval prompts of trace", text)
    self.assertIn("Accuracy under parallelism (final answer", text)
    self.assertRegex(text, r"Batch 2: [0-9]+ tokens/s")
    # Each method's figures reach the log as soon as they are measured,
    # before the extra batch sizes' pass.
    measured = text.index("  BD threshold 0.9: ")
    self.assertRegex(
        text[measured:],
        r"^  BD threshold 0\.9: [0-9.]+% final answer, [0-9.]+ tokens per"
        r" forward, [0-9.]+ ms per prompt at batch 1, [0-9]+ tokens/s at"
        r" batch 4 \([0-9]+ s\)\n  batch 2: ",
    )
    # The extra batch size times its first `extra_batches` batches alone
    # (speed: decoding is batch-invariant), and every pass says its cost.
    self.assertIn(
        "  batch 2: 4 prompts (2 batches) x 3 methods x 1 repeats", text
    )
    for size in (1, 4, 2):
      self.assertRegex(
          text,
          rf"\n  batch {size} done: [0-9]+ s, [0-9]+ s of it the methods'"
          r" first batches \(compiling\)",
      )


class QuickstartTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = absltest.get_default_test_tmpdir()
    # The README snippet's process: the run's shared XLA cache (conftest.py),
    # so that it reuses the programs compiled here; one of its own when run
    # alone.
    cls.env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )
    cls.env.setdefault(
        "JAX_COMPILATION_CACHE_DIR", os.path.join(cls.root, "xla_cache")
    )
    # The default, relative workdir of the README's main job.
    cls.workdir = os.path.join(cls.root, "runs", "quickstart")
    cls.quickstart = cls.tunix("quickstart.py:tiny")
    cls.ar_dir = os.path.join(cls.workdir, "ar_pretrain", "export")
    cls.bd_dir = os.path.join(cls.workdir, "sft", "export")

  @classmethod
  def tunix(cls, *args, module="tunix_bd"):
    """`tunix run ARGS` (`module="benchmarks"`: `python -m benchmarks ARGS`)
    through the host's `main` in this process, from the test's root.

    The CLI's own process (one line, exit status, no traceback) is held by
    cli/cli_test.py's subprocess tests, a fresh interpreter by the README
    snippet's run here; the recipes run in this process, so that each
    reuses the programs the quickstart compiled.
    """
    local = benchmarks_plugin.PLUGIN if module == "benchmarks" else None
    stdout, stderr = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(cls.root)
    try:
      with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(
          stderr
      ):
        status = main.main(["run", "--plugin", module, *args], plugin=local)
    finally:
      os.chdir(cwd)
    return subprocess.CompletedProcess(
        args, status, stdout.getvalue(), stderr.getvalue()
    )

  def assertSucceeded(self, proc):
    self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])

  def test_quickstart_writes_the_report(self):
    self.assertSucceeded(self.quickstart)
    with open(os.path.join(self.workdir, "report.json")) as f:
      rows = json.load(f)["rows"]
    self.assertEqual(
        [r["method"] for r in rows],
        ["AR (Tunix Sampler)", "AR, one-token blocks", "BD threshold 0.9"],
    )
    self.assertEqual([r["threshold"] for r in rows], [None, None, 0.9])
    for row in rows:
      self.assertBetween(row["exact_match"], 0.0, 1.0)
      # A 4-step model may answer with EOS alone: zero tokens is possible.
      self.assertGreaterEqual(row["tokens_per_s"], 0.0)
      self.assertGreaterEqual(row["tokens_per_forward"], 0.0)
      self.assertGreater(row["batch1_ms"], 0.0)
    self.assertAlmostEqual(rows[0]["batch1_speedup_vs_ar"], 1.0)
    self.assertAlmostEqual(rows[0]["throughput_vs_ar"], 1.0)
    self.assertTrue(os.path.exists(os.path.join(self.workdir, "report.png")))
    self.assertTrue(os.path.exists(os.path.join(self.workdir, "frontier.png")))
    self.assertIn(
        "Headline, block diffusion at threshold 0.9", self.quickstart.stdout
    )
    self.assertIn("BD threshold 0.9", self.quickstart.stdout)
    # Output is not a terminal: progress lines instead of the bar.
    for stage in ("AR pretraining", "Block-diffusion SFT"):
      self.assertIn(f"[{stage}] step 4/4 (100%)", self.quickstart.stdout)

  def test_readme_decoding_from_python_runs_verbatim(self):
    # The snippet, extracted from README.md, runs unchanged where the
    # README's main job wrote `runs/quickstart`.
    self.assertSucceeded(self.quickstart)
    snippet = subprocess.run(
        [sys.executable, "-c", readme.python_snippet("Decoding from Python")],
        cwd=self.root,
        env=self.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    self.assertSucceeded(snippet)
    # Three prints: the completions of two strings, the completion of one
    # BatchEncoding, then the token-level API's completion of that same
    # prompt with its tokens per forward.
    printed = snippet.stdout.strip().splitlines()
    self.assertLen(printed, 3)
    strings, encoded = map(ast.literal_eval, printed[:2])
    self.assertLen(strings, 2)
    self.assertLen(encoded, 1)
    for completion in (*strings, *encoded):
      self.assertIsInstance(completion, str)
    token_level = re.fullmatch(r"(.*) \[([0-9.]+)\]", printed[2])
    self.assertIsNotNone(token_level, printed[2])
    # Tokens per forward (0 for the tiny model's empty answers).
    self.assertGreaterEqual(float(token_level.group(2)), 0.0)
    # Text in and token ids in decode the same prompt greedily at the same
    # threshold: the same completion.
    self.assertEqual(token_level.group(1), encoded[0])
    # No "PyTorch was not found" notice (transformers is imported).
    self.assertNotIn("PyTorch", snippet.stderr)

  def test_sft_export_carries_the_block_diffusion_settings(self):
    self.assertSucceeded(self.quickstart)
    bd = bd_config_lib.load_settings(self.bd_dir)
    self.assertEqual(bd.block_size, 8)
    self.assertEqual(bd.alignment, "shifted")
    with self.assertRaisesRegex(ValueError, "not a block-diffusion"):
      bd_config_lib.load_settings(self.ar_dir)

  def test_sft_export_records_its_source_by_content_and_no_path(self):
    self.assertSucceeded(self.quickstart)
    with open(os.path.join(self.bd_dir, bd_config_lib.SETTINGS_FILE)) as f:
      settings = json.load(f)
    self.assertEqual(
        settings["converted_from"],
        {
            "digest": checkpoint_digest.digest_checkpoint(self.ar_dir).digest,
            # As the quickstart wrote it: relative to the working directory.
            "path": os.path.join("runs", "quickstart", "ar_pretrain", "export"),
        },
    )
    # Every JSON the run wrote (exports, fingerprints, metrics, reports).
    written = []
    for directory, _, names in os.walk(self.workdir):
      written += [
          os.path.join(directory, n)
          for n in names
          if n.endswith((".json", ".jsonl"))
      ]
    for export in (self.ar_dir, self.bd_dir):
      self.assertContainsSubset(
          [
              os.path.join(export, n)
              for n in os.listdir(export)
              if n.endswith(".json")
          ],
          written,
      )
    for name in (
        "report.json",
        "sft/metrics.jsonl",
        "sft/checkpoints/fingerprint.json",
        "ar_pretrain/eval.json",
    ):
      self.assertIn(os.path.join(self.workdir, name), written)
    for path in written:
      self.assertNoMachinePath(path)

  def assertNoMachinePath(self, path):
    with open(path, encoding="utf-8") as f:
      text = f.read()
    for root in {self.root, os.path.realpath(self.root), os.getcwd()}:
      self.assertNotIn(root, text, path)
    lines = text.splitlines() if path.endswith(".jsonl") else [text]
    for line in lines:
      for value in _strings(json.loads(line)):
        # A vocabulary holds "/" as a token; a path names something real.
        if os.path.isabs(value) and value != os.sep:
          self.assertFalse(os.path.exists(value), f"{path}: {value}")

  def test_generate_needs_no_paths_writes_completions_and_verifies_replay(
      self,
  ):
    self.assertSucceeded(self.quickstart)
    # The quickstart names the next command, which needs no arguments: the
    # default checkpoint is the quickstart's export, the default workdir
    # runs/generate. Only the replay check and a temperature are set here.
    last_line = self.quickstart.stdout.strip().splitlines()[-1]
    self.assertTrue(
        last_line.endswith(": tunix run --plugin tunix_bd generate.py"),
        last_line,
    )
    proc = self.tunix(
        "generate.py:tiny",
        "--config.verify_replay=True",
        "--config.decode.temperature=0.7",
    )
    self.assertSucceeded(proc)
    self.assertIn("generate: 8 prompts", proc.stdout)
    completions = os.path.join(
        self.root, "runs", "generate", "completions.jsonl"
    )
    self.assertNoMachinePath(completions)
    with open(completions) as f:
      rows = [json.loads(line) for line in f]
    self.assertLen(rows, 8)
    for row in rows:
      self.assertGreater(row["num_forwards"], 0)
      self.assertGreaterEqual(row["tokens_per_forward"], 0.0)
    error = float(proc.stdout.split("log-prob")[-1].split()[0])
    self.assertLess(error, 1e-5)

  def test_compare_reports_a_users_prompts(self):
    self.assertSucceeded(self.quickstart)
    prompts = os.path.join(self.root, "user_prompts.jsonl")
    with open(prompts, "w") as f:
      for prompt, answer in (("sort 31", "13"), ("reverse 12", "21")):
        f.write(json.dumps({"prompt": prompt, "answer": answer}) + "\n")
    workdir = os.path.join(self.root, "compare")
    proc = self.tunix(
        "compare.py:tiny",
        f"--config.data.prompts={prompts}",
        f"--config.workdir={workdir}",
        "--config.thresholds=(0.5,0.9)",
        "--config.batch_size=2",
        "--config.model.dtype=bfloat16",
    )
    self.assertSucceeded(proc)
    with open(os.path.join(workdir, "report.json")) as f:
      rows = json.load(f)["rows"]
    self.assertEqual([r["threshold"] for r in rows], [None, None, 0.5, 0.9])
    # Every method decoded the float32 exports in bfloat16.
    self.assertEqual({r["dtype"] for r in rows}, {"bfloat16"})
    for name in ("report.txt", "report.png", "frontier.png"):
      self.assertTrue(os.path.exists(os.path.join(workdir, name)), name)
    self.assertIn("2 prompts (data.prompts=", proc.stdout)

  def test_compare_refuses_an_unconverted_model_before_compute(self):
    proc = self.tunix("compare.py:tiny", f"--config.model.bd={self.ar_dir}")
    self.assertEqual(proc.returncode, 1)
    self.assertIn("model.bd=", proc.stderr)
    self.assertIn("not a block-diffusion checkpoint", proc.stderr)

  def test_generate_names_the_converted_models_that_exist(self):
    self.assertSucceeded(self.quickstart)
    proc = self.tunix(
        "generate.py:tiny", "--config.model.checkpoint=runs/sft/export"
    )
    self.assertEqual(proc.returncode, 1)
    self.assertIn(
        "model.checkpoint='runs/sft/export' is not a directory", proc.stderr
    )
    self.assertIn("runs/quickstart/sft/export", proc.stderr)

  def test_generate_checks_decode_settings_before_the_checkpoint(self):
    # The checkpoint does not exist: the decode error must come first.
    proc = self.tunix(
        "generate.py:tiny",
        "--config.model.checkpoint=no/such/dir",
        "--config.decode.threshold=2",
    )
    self.assertEqual(proc.returncode, 1)
    error = proc.stderr.split("error:")[-1]
    self.assertIn("decode.threshold: threshold must be", error)
    self.assertNotIn("no/such/dir", error)

  def test_generate_prompt_length_error_lists_the_users_rows(self):
    self.assertSucceeded(self.quickstart)
    prompts = os.path.join(self.root, "three_prompts.jsonl")
    with open(prompts, "w") as f:
      for prompt, answer in (
          ("sort 31", "13"),
          ("reverse 12", "21"),
          ("sort 2", "2"),
      ):
        f.write(json.dumps({"prompt": prompt, "answer": answer}) + "\n")
    proc = self.tunix(
        "generate.py:tiny",
        f"--config.data.prompts={prompts}",
        "--config.decode.max_prompt_length=5",
    )
    self.assertEqual(proc.returncode, 1)
    error = proc.stderr.split("error:")[-1]
    self.assertIn("decode.max_prompt_length=5", error)
    rows = [int(r) for r in re.findall(r"(\d+) \(\d+ tokens\)", error)]
    self.assertEqual(rows, [0, 1, 2])  # The file's rows, not a padded batch's.

  def test_generate_rejects_settings_the_model_was_not_trained_with(self):
    self.assertSucceeded(self.quickstart)
    proc = self.tunix(
        "generate.py:tiny",
        f"--config.model.checkpoint={self.bd_dir}",
        "--config.bd.block_size=4",
    )
    self.assertEqual(proc.returncode, 1)
    self.assertIn("bd.block_size=4 disagrees with the checkpoint", proc.stderr)

  def test_bench_decode_prints_side_by_side_ratios(self):
    # bench_sft's end-to-end run: tunix_bd_tests/benchmarks/bench_sft_test.py.
    self.assertSucceeded(self.quickstart)
    # The long workload at a budget of 12 on the tiny quickstart's models
    # (which workloads are read: decode_bench_settings_test.py).
    output = os.path.join(self.root, "bench_decode.json")
    decode_bench = self.tunix(
        "bench_decode.py:tiny",
        f"--config.workload_settings.long.ar_checkpoint={self.ar_dir}",
        f"--config.workload_settings.long.bd_checkpoint={self.bd_dir}",
        "--config.workloads=('long',)",
        "--config.workload_settings.long.max_new_tokens=12",
        f"--config.output={output}",
        module="benchmarks",
    )
    self.assertSucceeded(decode_bench)
    for text in (
        "ar",
        "ar_loop",
        "bd_cache_free",
        "bd_cached",
        "replay",
        "a forward in its decoding program",
        "TPF ceiling",
    ):
      self.assertIn(text, decode_bench.stdout)
    with open(output) as f:
      report = json.load(f)
    self.assertEqual(list(report["workloads"]), ["long"])
    long = report["workloads"]["long"]
    self.assertEqual(long["max_new_tokens"], 12)
    self.assertEqual(list(long["cells"]), ["batch=1", "batch=2"])
    self.assertEqual(list(long["replay"]), ["batch=1", "batch=2"])
    for r in long["replay"].values():
      self.assertGreater(r["replay_over_rollout"], 0.0)
    for cells in long["cells"].values():
      # The same model and greedy rule: cached and cache-free agree.
      self.assertEqual(
          cells["bd_cached"]["exact_match"],
          cells["bd_cache_free"]["exact_match"],
      )
      self.assertEqual(
          cells["bd_cached"]["new_tokens"], cells["bd_cache_free"]["new_tokens"]
      )
      self.assertAlmostEqual(cells["ar"]["speedup_vs_ar"], 1.0)
      # The roofline: cached methods have one, the cache-free one none.
      # Their forwards' share is measured inside their own programs: less
      # than 1 by construction (on this tiny model, noise may tip it below 0).
      for method in ("ar_loop", "bd_cached"):
        self.assertLess(cells[method]["forward_share"], 1.0)
      self.assertIsNone(cells["bd_cache_free"]["ideal_vs_ar_loop"])
      self.assertIsNone(cells["bd_cache_free"]["forward_share"])
      self.assertEqual(
          cells["bd_cached"]["tpf_ceiling"],
          long["tpf_ceiling"][str(long["block_size"])],
      )

  def test_bench_decode_fails_before_compute_on_a_missing_checkpoint(self):
    proc = self.tunix(
        "bench_decode.py:tiny",
        "--config.workloads=('short', 'long')",
        "--config.workload_settings.long.bd_checkpoint=no/such/dir",
        module="benchmarks",
    )
    self.assertEqual(proc.returncode, 1)
    self.assertIn("workload_settings", proc.stderr)


if __name__ == "__main__":
  absltest.main()
