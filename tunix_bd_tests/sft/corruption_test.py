# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.sft.corruption: exact masks, statistics, determinism."""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd import config_utils
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.sft import corruption

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_EOS = _TOKENIZER.eos_token_id
_PAD = _TOKENIZER.pad_token_id
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
_ALIGNMENTS = (bd_config.SAME_POSITION, bd_config.SHIFTED)


def _config(block_size=8, alignment=bd_config.SHIFTED):
  return bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )


def _embedded(num_examples=24, max_length=48):
  mix = tasks_lib.TaskMix(
      tasks=("sort", "reverse", "add"), min_len=1, max_len=7, seed=3
  )
  conversations = dataset_lib.embedded_conversations(mix, "train", num_examples)
  return dataset_lib.tokenize(_TOKENIZER, conversations, max_length)


def _row(prompt_length, length, max_length, seed=0):
  """A synthetic right-padded row: random characters, completion ends in EOS."""
  rng = np.random.default_rng(seed)
  tokens = np.full(max_length, _PAD, np.int32)
  tokens[:length] = rng.integers(10, 100, length)
  tokens[length - 1] = _EOS
  index = np.arange(max_length)
  return {
      "tokens": tokens,
      "completion_mask": (index >= prompt_length) & (index < length),
      "valid_mask": index < length,
  }


def _corrupt(row, corruption_config, config=None, example_id=0, epoch=0):
  return corruption.corrupt_example(
      row,
      example_id=example_id,
      epoch=epoch,
      corruption=corruption_config,
      config=config or _config(),
      eos_id=_EOS,
  )


class CorruptExampleTest(parameterized.TestCase):

  @parameterized.product(
      alignment=_ALIGNMENTS, block_size=(1, 4, 8), complementary=(False, True)
  )
  def test_masks_match_brute_force_spans(
      self, alignment, block_size, complementary
  ):
    data = _embedded()
    config = _config(block_size, alignment)
    cc = corruption.SftCorruptionConfig(
        min_noise=0.3, max_noise=0.9, complementary=complementary
    )
    for i in range(len(data)):
      out = _corrupt(data.row(i), cc, config, example_id=i, epoch=2)
      length, prompt = int(data.lengths[i]), int(data.prompt_lengths[i])
      end = -(-length // block_size) * block_size
      self.assertEqual(out["tokens"].shape, (1 + complementary, 48))
      for r in range(1 + complementary):
        tokens = out["tokens"][r]
        # EOS fill: the answer's EOS block is completed with EOS.
        np.testing.assert_array_equal(tokens[:length], data.tokens[i, :length])
        np.testing.assert_array_equal(tokens[length:end], _EOS)
        np.testing.assert_array_equal(tokens[end:], _PAD)
        index = np.arange(48)
        np.testing.assert_array_equal(out["positions"][r], index)
        np.testing.assert_array_equal(out["segment_ids"][r], index < end)
        eligible = (index >= prompt) & (index < end)
        np.testing.assert_array_equal(out["completion_mask"][r], eligible)
        corrupted = out["corruption_mask"][r]
        # Never the prompt, never padding.
        self.assertFalse((corrupted & ~eligible).any())
        np.testing.assert_array_equal(
            out["noisy_tokens"][r], np.where(corrupted, _MASK, tokens)
        )
        np.testing.assert_array_equal(
            out["loss_weights"][r], corrupted.astype(np.float32)
        )
      # The fill tokens are loss-eligible: some get corrupted somewhere.
      if complementary and end > length:
        fill = np.arange(length, end)
        self.assertTrue(out["corruption_mask"][:, fill].any(axis=0).all())

  @parameterized.parameters(1, 3, 8)
  def test_every_eligible_block_has_a_corrupted_token(self, block_size):
    data = _embedded()
    config = _config(block_size)
    # Tiny noise: the draws alone would often corrupt nothing.
    cc = corruption.SftCorruptionConfig(min_noise=0.01, max_noise=0.02)
    forced_blocks = 0
    for i in range(len(data)):
      for epoch in range(3):
        out = _corrupt(data.row(i), cc, config, example_id=i, epoch=epoch)
        blocks = np.arange(48) // block_size
        for b in np.unique(blocks[out["completion_mask"][0]]):
          in_block = blocks == b
          count = out["corruption_mask"][0, in_block].sum()
          self.assertGreaterEqual(count, 1)
          forced_blocks += count == 1
    self.assertGreater(forced_blocks, 50)

  def test_complementary_rows_are_exact_complements(self):
    data = _embedded()
    for weighting in corruption.LOSS_WEIGHTINGS:
      cc = corruption.SftCorruptionConfig(
          min_noise=0.05,
          max_noise=0.95,
          complementary=True,
          loss_weighting=weighting,
      )
      for i in range(len(data)):
        out = _corrupt(data.row(i), cc, example_id=i)
        eligible = out["completion_mask"][0]
        first, second = out["corruption_mask"]
        np.testing.assert_array_equal(second, eligible & ~first)
        self.assertFalse((first & second).any())
        np.testing.assert_array_equal(first | second, eligible)
        np.testing.assert_array_equal(out["tokens"][0], out["tokens"][1])
        np.testing.assert_allclose(
            out["noise_level"][1], 1.0 - out["noise_level"][0], atol=1e-7
        )

  def test_inverse_t_weights(self):
    data = _embedded()
    cc = corruption.SftCorruptionConfig(
        min_noise=0.2,
        max_noise=0.8,
        complementary=True,
        loss_weighting=corruption.INVERSE_T,
    )
    out = _corrupt(data.row(5), cc, example_id=5)
    t = out["noise_level"]
    want = np.where(out["corruption_mask"], 1.0 / t, 0.0)
    np.testing.assert_allclose(out["loss_weights"], want, rtol=1e-6)
    # Constant within a block, in [min_noise, max_noise] for the first row.
    blocks = np.arange(48) // 8
    for b in range(6):
      self.assertLen(np.unique(t[0, blocks == b]), 1)
    self.assertTrue(((t[0] >= 0.2) & (t[0] < 0.8)).all())

  def test_rate_follows_the_noise_level(self):
    block_size, max_length = 16, 160
    config = _config(block_size)
    cc = corruption.SftCorruptionConfig(min_noise=0.05, max_noise=1.0)
    # A 13-token prompt, so the first block has only n = 3 eligible tokens
    # (where forcing matters most), then full blocks up to the EOS fill.
    row = _row(13, max_length - 10, max_length)
    rates, expected, levels, sizes = [], [], [], []
    blocks = np.arange(max_length) // block_size
    for example_id in range(400):
      out = _corrupt(row, cc, config, example_id=example_id)
      eligible = out["completion_mask"][0]
      for b in np.unique(blocks[eligible]):
        sel = (blocks == b) & eligible
        n, t = sel.sum(), float(out["noise_level"][0, sel][0])
        rates.append(out["corruption_mask"][0, sel].mean())
        # E[corrupted] = n t + P(no draw below t) = n t + (1 - t)^n.
        expected.append(t + (1 - t) ** n / n)
        levels.append(t)
        sizes.append(n)
    rates, expected = np.array(rates), np.array(expected)
    levels, sizes = np.array(levels), np.array(sizes)
    self.assertGreater(len(rates), 3500)
    # Levels are U[0.05, 1]: mean 0.525, sd 0.274.
    self.assertAlmostEqual(levels.mean(), 0.525, delta=0.015)
    self.assertTrue(((levels >= 0.05) & (levels <= 1.0)).all())
    # The mean residual is zero within 4 standard errors, for all blocks
    # and separately for the partial ones.
    for sel in (sizes > 0, sizes == 3):
      residual = rates[sel] - expected[sel]
      error = residual.std() / np.sqrt(sel.sum())
      self.assertLess(abs(residual.mean()), 4 * error)
    # Full blocks: the rate regresses on t with slope 1 and intercept ~0.
    full = sizes == block_size
    slope, intercept = np.polyfit(levels[full], rates[full], 1)
    self.assertAlmostEqual(slope, 1.0, delta=0.03)
    self.assertAlmostEqual(intercept, 0.0, delta=0.02)
    # A wrong schedule (rate = t / 2) would fail the same check.
    self.assertGreater(abs(np.mean(rates - expected / 2)), 0.1)

  def test_deterministic_in_seed_example_and_epoch(self):
    data = _embedded()
    cc = corruption.SftCorruptionConfig(min_noise=0.1, max_noise=0.9, seed=7)
    row = data.row(3)
    first = _corrupt(row, cc, example_id=3, epoch=1)
    again = _corrupt(row, cc, example_id=3, epoch=1)
    for key in corruption.FIELDS:
      np.testing.assert_array_equal(first[key], again[key])
    for other in (
        _corrupt(row, cc, example_id=3, epoch=2),
        _corrupt(row, cc, example_id=4, epoch=1),
        _corrupt(row, dataclasses.replace(cc, seed=8), example_id=3, epoch=1),
        # Epoch 0 must not alias the shorter entropy [seed, id].
        _corrupt(row, cc, example_id=3, epoch=0),
    ):
      self.assertFalse(
          np.array_equal(first["noise_level"], other["noise_level"])
      )

  def test_multi_turn_supervises_only_the_final_assistant_turn(self):
    messages = [
        {"role": "user", "content": "sort 321"},
        {"role": "assistant", "content": "999"},
        {"role": "user", "content": "reverse 45"},
        {"role": "assistant", "content": "54"},
    ]
    conversation = dataset_lib.Conversation(messages, "jsonl", "chat[0]")
    data = dataset_lib.tokenize(_TOKENIZER, [conversation], 96)
    config = _config(4)
    cc = corruption.SftCorruptionConfig(min_noise=1.0, max_noise=1.0)
    out = _corrupt(data.row(0), cc, config)
    supervised = out["completion_mask"][0]
    text = _TOKENIZER.decode(out["tokens"][0][supervised])
    length = int(data.lengths[0])
    num_fill = -(-length // 4) * 4 - length
    self.assertEqual(text, "54" + "<|im_end|>" * (1 + num_fill))
    # max_noise = 1 corrupts every supervised token and nothing else, so
    # the earlier assistant turn ("999") is never a target.
    np.testing.assert_array_equal(out["corruption_mask"][0], supervised)
    prefix = _TOKENIZER.decode(out["noisy_tokens"][0][: data.prompt_lengths[0]])
    self.assertIn("999", prefix)

  def test_same_position_allows_an_empty_prompt(self):
    row = _row(0, 10, 16)
    cc = corruption.SftCorruptionConfig(min_noise=1.0, max_noise=1.0)
    out = _corrupt(row, cc, _config(4, bd_config.SAME_POSITION))
    self.assertTrue(out["corruption_mask"][0, 0])


def _corrupt_blocks_reference(rng, eligible, blocks, num_blocks, low, high):
  """Block by block: draws below t, else the block's smallest draw."""
  t = rng.uniform(low, high, num_blocks).astype(np.float32)
  draws = rng.random(len(eligible))
  corrupted = eligible & (draws < t[blocks])
  for block in np.unique(blocks[eligible]):
    in_block = np.flatnonzero(eligible & (blocks == block))
    corrupted[in_block[np.argmin(draws[in_block])]] = True
  return corrupted, t[blocks]


class CorruptBlocksTest(parameterized.TestCase):
  """The kernel SFT and OPD share, against a per-block loop."""

  @parameterized.parameters(1, 3, 8)
  def test_equals_a_per_block_reference(self, block_size):
    config = corruption.SftCorruptionConfig(min_noise=0.1, max_noise=0.6)
    rng = np.random.default_rng(0)
    for trial in range(200):
      length = int(rng.integers(1, 40))
      # Shuffled logical positions: OPD's blocks need not be contiguous.
      blocks = rng.permutation(length) // block_size
      eligible = rng.random(length) < rng.random()
      num_blocks = int(blocks.max()) + 1
      got = corruption.corrupt_blocks(
          np.random.default_rng([trial, corruption.CORRUPTION_STREAM]),
          eligible,
          blocks,
          num_blocks=num_blocks,
          corruption=config,
      )
      want = _corrupt_blocks_reference(
          np.random.default_rng([trial, corruption.CORRUPTION_STREAM]),
          eligible,
          blocks,
          num_blocks,
          config.min_noise,
          config.max_noise,
      )
      np.testing.assert_array_equal(got[0], want[0])
      np.testing.assert_array_equal(got[1], want[1])
      self.assertFalse((got[0] & ~eligible).any())
      for block in np.unique(blocks[eligible]):
        self.assertTrue(got[0][eligible & (blocks == block)].any())


class SftCorruptionConfigTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("min_above_max", dict(min_noise=0.6, max_noise=0.5), "min_noise=0.6"),
      ("zero_min", dict(min_noise=0.0), "min_noise must be in"),
      ("max_above_one", dict(max_noise=1.5), "max_noise must be in"),
      ("nan", dict(min_noise=float("nan")), "min_noise must be in"),
      ("bool", dict(max_noise=True), "max_noise must be a number"),
      ("string", dict(min_noise="0.1"), "min_noise must be a number"),
      ("weighting", dict(loss_weighting="linear"), "loss_weighting must be"),
      ("seed", dict(seed=-1), "seed must be"),
      ("complementary", dict(complementary=1), "complementary must be"),
      (
          "unbounded_complement",
          dict(complementary=True, loss_weighting="inverse_t"),
          "max_noise < 1",
      ),
  )
  def test_rejects(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      corruption.SftCorruptionConfig(**kwargs)

  def test_from_section(self):
    from_section = lambda section: config_utils.from_section(
        corruption.SftCorruptionConfig, section, "corruption"
    )
    cc = from_section({"min_noise": 0.25, "max_noise": 0.75, "seed": 3})
    self.assertEqual((cc.min_noise, cc.max_noise, cc.seed), (0.25, 0.75, 3))
    with self.assertRaisesRegex(ValueError, "^unknown corruption config"):
      from_section({"min_nosie": 0.2})
    # A bad value names its config key (sft.py, opd.py).
    with self.assertRaisesRegex(
        ValueError, r"^corruption\.min_noise must be in \(0, 1\]"
    ):
      from_section({"min_noise": 2.0})
    with self.assertRaisesRegex(
        ValueError, r"^corruption\.min_noise=0\.5 must be <= max_noise"
    ):
      from_section({"min_noise": 0.5, "max_noise": 0.25})


if __name__ == "__main__":
  absltest.main()
