# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`sft_step`: its sections fail closed; the plan, summary and table."""

from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
from benchmarks import chips
from benchmarks import memory_plan
from benchmarks import sft_step
from benchmarks import sft_step_settings
from flax import nnx
import jax
import jax.numpy as jnp
from tunix.models.qwen3 import model as qwen3_lib
from tunix_bd import config_utils
from tunix_bd.models import sections


class SettingsTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("no_ar", dict(variants=("bd_clean_context",)), r"bench\.variants"),
      ("unknown", dict(variants=("ar", "bd")), r"bench\.variants"),
      ("batch", dict(batch_size=0), r"bench\.batch_size"),
      ("steps", dict(num_steps=0), r"bench\.num_steps"),
      ("warmup", dict(warmup_steps=0), r"bench\.warmup_steps"),
  )
  def test_bad_bench_keys_are_named(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      sft_step_settings.SftStepSettings(**overrides)

  @parameterized.named_parameters(
      ("heads", dict(num_heads=3), r"model\.num_heads"),
      ("layers", dict(num_layers=0), r"model\.num_layers"),
      ("vocab", dict(vocab_size=-1), r"model\.vocab_size"),
      ("dtype", dict(dtype="float16"), r"model\.dtype"),
      ("chunk", dict(logits_chunk=-1), r"model\.logits_chunk"),
  )
  def test_bad_model_keys_are_named(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      sft_step_settings.SftStepModelSettings(**overrides)
    with self.assertRaisesRegex(ValueError, r"bd\.block_size"):
      config_utils.from_section(sections.BlockSize, {"block_size": 0}, "bd")

  def test_the_model_is_over_the_tokenizer_or_a_larger_vocabulary(self):
    dense = sft_step_settings.SftStepModelSettings(
        logits_chunk=0
    )  # Dense: valid.
    self.assertEqual(dense.qwen3_config(128).vocab_size, 128)
    wide = sft_step_settings.SftStepModelSettings(
        vocab_size=1000, dtype="bfloat16"
    )
    config = wide.qwen3_config(128)
    self.assertEqual(config.vocab_size, 1000)
    self.assertEqual(config.num_layers, wide.num_layers)
    self.assertEqual(str(config.dtype), "bfloat16")
    with self.assertRaisesRegex(ValueError, r"model\.vocab_size=100 .* 128"):
      sft_step_settings.SftStepModelSettings(vocab_size=100).qwen3_config(128)

  def test_the_section_takes_its_defaults_from_the_dataclass(self):
    section = config_utils.to_section(sft_step_settings.SftStepModelSettings)
    self.assertEqual(
        config_utils.from_section(
            sft_step_settings.SftStepModelSettings, section, "model"
        ),
        sft_step_settings.SftStepModelSettings(),
    )


class PlanAndReportTest(absltest.TestCase):

  def test_planned_bytes_are_the_memory_plan_of_each_variant(self):
    model = sft_step_settings.SftStepModelSettings(
        logits_chunk=64, remat="decoder"
    )
    plan = {
        v: sft_step.planned_bytes(
            model, 512, batch_size=2, length=32, variant=v
        )
        for v in sft_step.VARIANTS
    }
    expected = memory_plan.sft_step_plan(
        memory_plan.ModelShape(
            num_layers=model.num_layers,
            embed_dim=model.embed_dim,
            hidden_dim=model.hidden_dim,
            num_heads=model.num_heads,
            num_kv_heads=model.num_kv_heads,
            head_dim=model.head_dim,
            vocab_size=512,
            tied_embedding=model.tie_embeddings,
        ),
        memory_plan.SftStep(
            batch_size=2,
            length=32,
            clean_context=True,
            autoregressive=False,
            dtype_bytes=4,
            remat="decoder",
            logits_chunk=64,
        ),
    ).total
    self.assertEqual(plan["bd_clean_context"], expected)
    # The clean copy doubles the tokens, so the activations.
    self.assertGreater(plan["bd_clean_context"], plan["bd_single_canvas"])

  def test_summary_is_relative_to_ar_and_the_table_has_a_row_each(self):
    times = {"ar": [0.1, 0.3, 0.2], "bd_clean_context": [0.4, 0.4, 0.4]}
    peaks = {"ar": 2**20, "bd_clean_context": 3 * 2**20}
    planned = {"ar": 2**21, "bd_clean_context": 2**22}
    report = sft_step.summarize(times, peaks, planned, real_tokens=100)
    self.assertAlmostEqual(report["ar"]["tokens_per_s"], 500.0)
    self.assertAlmostEqual(report["bd_clean_context"]["throughput_vs_ar"], 0.5)
    self.assertAlmostEqual(report["bd_clean_context"]["step_ms"], 400.0)
    self.assertEqual(report["bd_clean_context"]["peak_vs_ar"], 3.0)
    self.assertEqual(report["ar"]["planned_bytes"], 2**21)
    lines = sft_step.format_table(report, ["caption"]).splitlines()
    self.assertEqual(lines[0], "caption")
    self.assertEqual(
        lines[2].split(),
        ["ar", "500", "1.00", "200.0", "1.00", "1.00", "2.00", "-", "-", "-"],
    )
    # No MFU on this CPU, whose peak is not listed.
    self.assertIsNone(report["ar"]["mfu"])
    self.assertIsNone(report["ar"]["mfu_real_tokens"])
    self.assertEqual(lines[3].split()[0], "bd_clean_context")

  def test_mfu_on_real_tokens_is_mfu_times_their_share(self):
    times = {"ar": [0.5], "bd_single_canvas": [1.0]}
    peaks = planned = {"ar": 1, "bd_single_canvas": 1}
    kind = jax.devices()[0].device_kind
    with mock.patch.dict(chips.PEAK_BF16_FLOPS, {kind: 1e12}):
      report = sft_step.summarize(
          times,
          peaks,
          planned,
          real_tokens=100,
          flops={"ar": 2e11, "bd_single_canvas": 5e11},
          real_token_share=0.25,
          compile_s={"ar": 3.0, "bd_single_canvas": 4.5},
      )
    want = {"ar": (0.4, 0.1, 3.0), "bd_single_canvas": (0.5, 0.125, 4.5)}
    for name, (mfu, real_mfu, compile_s) in want.items():
      row = report[name]
      self.assertAlmostEqual(row["mfu"], mfu)
      self.assertAlmostEqual(row["mfu_real_tokens"], real_mfu)
      self.assertEqual(row["real_token_share"], 0.25)
      self.assertEqual(row["compile_s"], compile_s)
    line = sft_step.format_table(report, []).splitlines()[2].split()
    self.assertEqual(line[-3:], ["50%", "12%", "4.5"])


class ModelFlopsTest(absltest.TestCase):

  def test_the_forward_is_what_xla_counts(self):
    config = qwen3_lib.ModelConfig(
        num_layers=2,
        vocab_size=256,
        embed_dim=128,
        hidden_dim=256,
        num_heads=4,
        head_dim=32,
        num_kv_heads=2,
        rope_theta=1_000_000,
        norm_eps=1e-6,
        use_tied_embedding=False,
    )
    graphdef, state = nnx.split(
        nnx.eval_shape(lambda: qwen3_lib.Qwen3(config, rngs=nnx.Rngs(0)))
    )
    batch, length = 2, 64

    def forward(state, tokens):
      positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
      mask = jnp.ones((batch, length, length), bool)
      return nnx.merge(graphdef, state)(tokens, positions, None, mask)[0]

    tokens = jax.ShapeDtypeStruct((batch, length), jnp.int32)
    cost = jax.jit(forward).lower(state, tokens).compile().cost_analysis()
    counted = (cost[0] if isinstance(cost, list) else cost)["flops"]
    shape = memory_plan.ModelShape(2, 128, 256, 4, 2, 32, 256, False)
    flops = sft_step.model_flops(
        shape, batch_size=batch, length=length, variant="ar"
    )
    # The matmuls; XLA also counts the norms, softmax and activations.
    self.assertBetween(flops / 3 / counted, 0.97, 1.0)
    # `[noisy ; clean]` runs over twice the length, its head over one.
    head = 3 * batch * 2 * length * 128 * 256
    self.assertEqual(
        sft_step.model_flops(
            shape, batch_size=batch, length=length, variant="bd_clean_context"
        ),
        sft_step.model_flops(
            shape, batch_size=batch, length=2 * length, variant="ar"
        )
        - head,
    )


if __name__ == "__main__":
  absltest.main()
