# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.generate.denoise on a tiny real Tunix Qwen3.

Every decode here shares one geometry (block size 4, shifted alignment,
prompts of up to 10 tokens, 10 new tokens, 3 rows, one stop id), so the
decoder compiles once; rules, temperatures and weights are runtime values.
"""

import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import jax
import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.core import block_cache
from tunix_bd.core import diffusion_lm
from tunix_bd.core import eos
from tunix_bd.core import layer_scan
from tunix_bd.core import scoring
from tunix_bd.core import trace as trace_lib
from tunix_bd.generate import canvas as canvas_lib
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd_tests import test_common

_VOCAB = 128
_MASK = 127
_PAD = 0
_QWEN3 = test_common.tiny_qwen3(vocab_size=_VOCAB)
_BD = bd_config.BlockDiffusionConfig(
    block_size=4, mask_token_id=_MASK, alignment=bd_config.SHIFTED
)
# Heterogeneous: first blocks with 3, 2 and 0 prompt tokens; the first row's
# completion spans four blocks, the others three.
_PROMPTS = [
    [5, 17, 33, 8, 91, 40, 12],
    [64, 3],
    [22, 9, 71, 15, 101, 44, 6, 30],
]
_SEEDS = [11, 12, 13]
_RUNS = (
    dict(rule=commit_rules.THRESHOLD, threshold=0.5, temperature=0.0),
    dict(rule=commit_rules.TOP_K, top_k=2, temperature=0.0),
    dict(rule=commit_rules.FACTOR, factor=1.0, temperature=0.8),
    dict(rule=commit_rules.THRESHOLD, threshold=0.3, temperature=1.3),
)


def _config(stop_id=1, **kwargs):
  return denoise.DenoiseConfig(
      max_new_tokens=10,
      max_prompt_length=10,
      stop_ids=(stop_id,),
      pad_id=_PAD,
      **kwargs,
  )


def _generate(config, model=_QWEN3, prompts=_PROMPTS):
  return denoise.Denoiser(model, bd=_BD, config=config)(
      prompts, seeds=_SEEDS[: len(prompts)]
  )


def _with_weights(edit) -> nnx.Module:
  """A copy of the model with `edit(pure_state_dict)` applied."""
  graphdef, state = nnx.split(_QWEN3)
  pure = state.to_pure_dict()
  edit(pure)
  return nnx.merge(graphdef, pure)


def _block_geometry(trace):
  """`[batch, max_new_tokens]` block of each slot, 0 = the row's first."""
  return trace_lib.completion_blocks(
      trace.prompt_lengths, trace.tokens.shape[1], trace.bd.block_size
  )


# At most 3 rows x 4 blocks x 4 steps.
_CANVASES = 48


@jax.jit
def _single_canvas_logits(graphdef, state, tokens, positions, segment_ids):
  return diffusion_lm.diffusion_logits_fn(
      nnx.merge(graphdef, state),
      tokens,
      positions,
      segment_ids,
      config=dataclasses.replace(_BD, layout=bd_config.SINGLE_CANVAS),
  )


def _brute_force_check(test, out, config, model=_QWEN3):
  """Rescores every pre-step canvas cache-free, one row at a time.

  Rebuilds, from the trace alone, the canvas each block had before each of
  its steps; checks that the decoder committed exactly the positions the
  rule picks from those canvases' confidences, the argmax when greedy, and
  recorded the log-prob of the committed token.

  Returns:
    `(token, logit)` of every committed position.
  """
  trace = out.trace
  size = _BD.block_size
  width = config.max_prompt_length + config.max_new_tokens
  items, canvases, segments = [], [], []
  for row, length in enumerate(trace.prompt_lengths):
    sequence = np.concatenate(
        [trace.prompt_tokens[row, :length], trace.tokens[row]]
    )
    steps = np.concatenate([np.full(length, -1), trace.action_step[row]])
    completion = np.arange(len(sequence)) >= length
    blocks = np.arange(len(sequence)) // size
    for block in np.unique(blocks[completion & (steps >= 0)]):
      here = completion & (blocks == block)
      for step in range(steps[here].max() + 1):
        # The block's own canvas before `step`, after clean earlier blocks;
        # later blocks are padding.
        masked = here & (steps >= step)
        canvas = np.zeros(width, np.int32)
        canvas[: len(sequence)] = np.where(masked, _MASK, sequence)
        segment = np.zeros(width, np.int32)
        segment[: len(sequence)] = blocks <= block
        items.append((row, length, here, masked, step))
        canvases.append(canvas)
        segments.append(segment)
  # A fixed number of canvases, so that the forward compiles once.
  test.assertLessEqual(len(canvases), _CANVASES)
  tokens = np.zeros((_CANVASES, width), np.int32)
  tokens[: len(canvases)] = canvases
  segment_ids = np.zeros_like(tokens)
  segment_ids[: len(canvases)] = segments
  positions = np.broadcast_to(np.arange(width, dtype=np.int32), tokens.shape)
  logits = np.asarray(
      _single_canvas_logits(*nnx.split(model), tokens, positions, segment_ids)
  )
  logp = np.asarray(scoring.log_probs(logits, trace.temperature))
  committed = []
  for k, (row, length, here, masked, step) in enumerate(items):
    idx = np.flatnonzero(here)
    confidence = np.exp(logp[k, idx].max(axis=-1))
    want = commit_rules.commit_mask(
        config.rule,
        confidence[None],
        masked[idx][None],
        threshold=config.threshold,
        top_k=config.top_k,
        factor=config.factor,
    )
    got = trace.action_step[row, idx - length] == step
    np.testing.assert_array_equal(got, np.asarray(want)[0])
    for i in idx[got]:
      token = trace.tokens[row, i - length]
      test.assertNotEqual(token, _MASK)
      if config.greedy:
        test.assertEqual(token, logits[k, i].argmax())
      np.testing.assert_allclose(
          trace.action_logp[row, i - length], logp[k, i, token], atol=1e-5
      )
      committed.append((token, logits[k, i, token]))
  return committed


class GenerateTest(parameterized.TestCase):

  @parameterized.parameters(*_RUNS)
  def test_trace_matches_a_brute_force_replay(self, **kwargs):
    config = _config(**kwargs)
    out = _generate(config)
    out.trace.validate()
    self.assertEqual(out.trace.temperature, config.temperature or 1.0)
    _brute_force_check(self, out, config)

  @parameterized.parameters(*_RUNS)
  def test_outputs_and_forward_counts(self, **kwargs):
    config = _config(**kwargs)
    out = _generate(config)
    trace = out.trace
    self.assertEqual(out.completion_tokens.dtype, np.int32)
    self.assertEqual(out.completion_tokens.shape, (3, 10))
    np.testing.assert_array_equal(out.completion_tokens, trace.tokens)
    generated = trace.action_step >= 0
    np.testing.assert_array_equal(out.completion_tokens[~generated], _PAD)
    for got, want in zip(
        out.completions, eos.truncate_at_stop(trace.tokens, config.stop_ids)
    ):
      np.testing.assert_array_equal(got, want)
    blocks = _block_geometry(trace)
    for row in range(3):
      gen_blocks = np.unique(blocks[row, generated[row]])
      steps = [
          trace.action_step[row, blocks[row] == b].max() + 1 for b in gen_blocks
      ]
      # Cache writes ride on the next block's first step: no extra forward
      # (rows 0 and 2 prefill a prompt block and write several blocks).
      self.assertEqual(out.num_forwards[row], sum(steps))
      if row != 1:
        self.assertGreaterEqual(len(gen_blocks), 2)
      self.assertAlmostEqual(
          out.tokens_per_forward[row],
          len(out.completions[row]) / out.num_forwards[row],
          places=6,
      )

  def test_forced_progress_and_step_bounds(self):
    # Next to nothing reaches a threshold of 1: steps commit the single most
    # confident position.
    out = _generate(_config(threshold=1.0))
    trace = out.trace
    blocks = _block_geometry(trace)
    for row in range(3):
      for block in np.unique(blocks[row]):
        steps = trace.action_step[row, blocks[row] == block]
        if (steps < 0).all():
          continue  # After the row's stop block.
        # Steps 0..k-1 each commit, and k <= the block's masked positions.
        used = np.unique(steps)
        np.testing.assert_array_equal(used, np.arange(len(used)))
        self.assertLessEqual(len(used), len(steps))
        self.assertLessEqual(len(steps), _BD.block_size)
    # A low threshold commits a whole block per step.
    out = _generate(_config(threshold=1e-6))
    np.testing.assert_array_equal(
        out.trace.action_step[out.trace.action_step >= 0], 0
    )

  def test_top_k_one_commits_one_token_per_step(self):
    out = _generate(_config(rule=commit_rules.TOP_K, top_k=1))
    trace = out.trace
    generated = trace.action_step >= 0
    blocks = _block_geometry(trace)
    for row in range(3):
      for block in np.unique(blocks[row, generated[row]]):
        here = blocks[row] == block
        np.testing.assert_array_equal(
            np.sort(trace.action_step[row, here]), np.arange(here.sum())
        )
    tokens = generated.sum(axis=1)
    # Cache writes share the forward of the next block's first step.
    np.testing.assert_array_equal(out.num_forwards, tokens)

  @parameterized.parameters(
      (4, 9, 13, ()),
      (8, 40, 16, (40,)),
      (8, 3, 15, ()),
      (32, 256, 1024, (256,)),
      (4, 8, 4, (8,)),
  )
  def test_the_canvas_is_the_longest_row_in_whole_blocks(
      self, size, max_prompt_length, budget, late
  ):
    layout = canvas_lib.Layout.create(size, max_prompt_length, budget)
    self.assertEqual(
        layout.length, -(-(max_prompt_length + budget) // size) * size
    )
    lengths = np.arange(1, max_prompt_length + 1)
    prompts = np.tile(lengths + 9, (max_prompt_length, 1))
    canvas = canvas_lib.build_canvas(prompts, lengths, layout, mask_id=7)
    real, positions = canvas["segments"] > 0, canvas["positions"]
    for row, length in enumerate(lengths):
      # The whole row, in order, at a whole-block offset.
      np.testing.assert_array_equal(
          positions[row][real[row]], np.arange(length + budget)
      )
      self.assertEqual(canvas["offsets"][row] % size, 0)
      # Loop block 0 holds its first block to denoise, or for the longest
      # prompts (`late`) the prompt block before it.
      column = layout.first * size
      block = length // size - (length in late)
      self.assertEqual(canvas["first_block"][row], block)
      self.assertEqual(positions[row][column], block * size)
      at = np.flatnonzero(canvas["completion"][row])
      self.assertEqual(at[0] // size, layout.first + (length in late))
      self.assertEqual(
          canvas["num_blocks"][row], at[-1] // size - layout.first + 1
      )

  @parameterized.parameters(0.0, 0.9)
  def test_stopping_truncates_and_changes_nothing_else(self, temperature):
    # A stop id no row produces: every row runs to max_new_tokens.
    for unused in range(1, _MASK):
      free = _generate(_config(stop_id=unused, temperature=temperature))
      if not np.isin(unused, free.completion_tokens):
        break
    self.assertTrue((free.trace.action_step >= 0).all())
    # Stop on a token that row 0 commits in its first block.
    stop = int(free.completion_tokens[0, 0])
    out = _generate(_config(stop_id=stop, temperature=temperature))
    blocks = _block_geometry(out.trace)
    stops_somewhere = False
    for row in range(3):
      hits = np.flatnonzero(free.completion_tokens[row] == stop)
      last = blocks[row, hits[0]] if hits.size else blocks[row].max()
      kept = blocks[row] <= last
      stops_somewhere |= (~kept).any()
      # Up to the stop block, exactly what the row does without stopping.
      for name in ("tokens", "action_step", "action_logp"):
        np.testing.assert_array_equal(
            getattr(out.trace, name)[row, kept],
            getattr(free.trace, name)[row, kept],
        )
      np.testing.assert_array_equal(out.trace.action_step[row, ~kept], -1)
      np.testing.assert_array_equal(out.completion_tokens[row, ~kept], _PAD)
      end = hits[0] if hits.size else 10
      np.testing.assert_array_equal(
          out.completions[row], free.completion_tokens[row, :end]
      )
      self.assertNotIn(stop, out.completions[row])
    self.assertTrue(stops_somewhere)
    self.assertLess(out.num_forwards[0], free.num_forwards[0])
    out.trace.validate()

  def test_mask_token_never_committed(self):
    # Give the mask token 3x the logit of the token greedy decoding commits
    # most: wherever that token wins with a positive logit, the raw argmax
    # is the mask.
    config = _config(threshold=0.3)
    plain = _generate(config)
    generated = plain.trace.action_step >= 0
    favourite = int(np.bincount(plain.completion_tokens[generated]).argmax())

    def boost(pure):
      head = np.array(pure["lm_head"]["w"])
      head[:, _MASK] = 3.0 * head[:, favourite]
      pure["lm_head"]["w"] = head

    model = _with_weights(boost)
    out = _generate(config, model=model)
    # The mask is excluded before every softmax: nothing changes at all.
    np.testing.assert_array_equal(
        out.completion_tokens, plain.completion_tokens
    )
    np.testing.assert_array_equal(
        out.trace.action_logp, plain.trace.action_logp
    )
    committed = _brute_force_check(self, out, config, model=model)
    self.assertTrue(
        any(token == favourite and logit > 0 for token, logit in committed)
    )
    out = _generate(dataclasses.replace(config, temperature=1.0), model=model)
    self.assertNotIn(_MASK, out.completion_tokens)

  def test_non_finite_logits_fail_closed_naming_rows(self):
    def poison(pure):
      table = np.array(pure["embedder"]["input_embedding"])
      table[64] = np.nan  # Only row 1's prompt holds token 64,
      pure["embedder"]["input_embedding"] = table
      head = np.array(pure["lm_head"]["w"])
      head[:, 64] = 0.0  # and no row is likely to generate it.
      pure["lm_head"]["w"] = head

    with self.assertRaisesRegex(ValueError, r"non-finite logits .* rows \[1\]"):
      _generate(_config(), model=_with_weights(poison))

  def test_padded_array_input_equals_lists(self):
    padded = np.zeros((3, 9), np.int32)
    for row, prompt in enumerate(_PROMPTS):
      padded[row, : len(prompt)] = prompt
    lengths = [len(p) for p in _PROMPTS]
    config = _config(temperature=0.7)
    got = denoise.Denoiser(_QWEN3, bd=_BD, config=config)(
        padded, lengths, seeds=_SEEDS
    )
    want = _generate(config)
    np.testing.assert_array_equal(got.completion_tokens, want.completion_tokens)
    np.testing.assert_array_equal(got.trace.action_logp, want.trace.action_logp)

  def test_one_token_blocks_are_greedy_ar_decoding(self):
    # The shifted alignment with blocks of one token is next-token
    # prediction: decoding must equal a brute-force greedy AR loop (full
    # causal forward per token, mask token excluded).
    bd = bd_config.BlockDiffusionConfig.autoregressive(_MASK)
    config = _config(stop_id=1)
    out = denoise.Denoiser(_QWEN3, bd=bd, config=config)(_PROMPTS)
    model = test_common.JittedModel(_QWEN3)
    # One width for every forward (one compile): under the causal mask the
    # pads after the last token change nothing before it.
    width = max(map(len, _PROMPTS)) + config.max_new_tokens
    causal = np.tril(np.ones((1, width, width), bool))
    for row, prompt in enumerate(_PROMPTS):
      tokens = list(prompt)
      while len(tokens) < len(prompt) + config.max_new_tokens:
        length = len(tokens)
        ids = np.full((1, width), _PAD, np.int32)
        ids[0, :length] = tokens
        logits, _ = model(ids, np.arange(width)[None], None, causal)
        logits = np.array(logits[0, length - 1], np.float32)
        logits[_MASK] = -np.inf
        tokens.append(int(np.argmax(logits)))
        if tokens[-1] == 1:
          break
      want = tokens[len(prompt) :]
      self.assertEqual(
          out.completions[row].tolist(), [t for t in want if t != 1]
      )
      np.testing.assert_array_equal(out.num_forwards[row], len(want))

  def test_denoiser_reuse_equals_generate_and_sees_weight_updates(self):
    config = _config(temperature=0.7)
    model = _with_weights(lambda pure: None)  # A copy we may update.
    denoiser = denoise.Denoiser(model, bd=_BD, config=config)
    for _ in range(2):  # Repeated calls are independent.
      got = denoiser(_PROMPTS, seeds=_SEEDS)
      want = _generate(config)
      np.testing.assert_array_equal(
          got.completion_tokens, want.completion_tokens
      )
      np.testing.assert_array_equal(
          got.trace.action_logp, want.trace.action_logp
      )

    # An in-place update (as an optimizer step or a weight sync makes) is
    # seen by the next call, with no new Denoiser.
    def scale_head(pure):
      pure["lm_head"]["w"] = 3.0 * np.asarray(pure["lm_head"]["w"])

    updated = _with_weights(scale_head)
    nnx.update(model, nnx.state(updated))
    got = denoiser(_PROMPTS, seeds=_SEEDS)
    want = _generate(config, model=updated)
    np.testing.assert_array_equal(got.trace.action_logp, want.trace.action_logp)
    self.assertFalse(
        np.array_equal(
            got.trace.action_logp, _generate(config).trace.action_logp
        )
    )


class ScannedLayersTest(parameterized.TestCase):
  """`scan_layers=True` decodes as Tunix's loop over the layers does."""

  def test_every_rule_commits_what_a_brute_force_replay_picks(self):
    self.assertTrue(
        layer_scan.is_stacked(
            block_cache.init_block_cache(_QWEN3, 1, 8, scan_layers=True).kv
        )
    )
    for run in _RUNS:
      config = _config(scan_layers=True, **run)
      out = _generate(config)
      _brute_force_check(self, out, config)
      want = _generate(_config(**run))
      np.testing.assert_array_equal(out.trace.tokens, want.trace.tokens)
      np.testing.assert_array_equal(
          out.trace.action_step, want.trace.action_step
      )
      np.testing.assert_allclose(
          out.trace.action_logp, want.trace.action_logp, atol=1e-6
      )

  @parameterized.parameters("qwen2", "llama3")
  def test_other_families_decode_the_loop_s_tokens(self, family):
    model = test_common.tiny_family_model(family, vocab_size=_VOCAB)
    config = _config(rule=commit_rules.THRESHOLD, threshold=0.5)
    got = _generate(dataclasses.replace(config, scan_layers=True), model)
    want = _generate(config, model)
    np.testing.assert_array_equal(got.trace.tokens, want.trace.tokens)
    np.testing.assert_array_equal(got.num_forwards, want.num_forwards)

  def test_an_injected_cached_call_is_refused(self):
    with self.assertRaisesRegex(ValueError, "scan_layers=True.*injected"):
      denoise.Denoiser(
          _QWEN3,
          bd=_BD,
          config=_config(scan_layers=True),
          cached_logits_fn=lambda *args, **kwargs: None,
      )


class ValidationTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("threshold_zero", dict(threshold=0.0), "threshold"),
      ("threshold_above_one", dict(threshold=1.5), "threshold"),
      ("top_k_zero", dict(top_k=0), "top_k"),
      ("negative_temperature", dict(temperature=-0.1), "temperature"),
      ("infinite_temperature", dict(temperature=float("inf")), "temperature"),
      ("factor_zero", dict(factor=0.0), "factor"),
      ("no_new_tokens", dict(max_new_tokens=0), "max_new_tokens"),
      ("bool_tokens", dict(max_new_tokens=True), "max_new_tokens"),
      ("unknown_rule", dict(rule="entropy"), "rule"),
      ("top_p", dict(top_p=0.9), r"sampling filters \['top_p'\]"),
      ("typo", dict(treshold=0.9), r"unknown denoise settings \['treshold'\]"),
      ("stop_ids", dict(stop_ids="2"), "stop_ids"),
      ("scan_layers", dict(scan_layers=1), "scan_layers"),
  )
  def test_bad_config(self, change, message):
    settings = dict(max_new_tokens=4, max_prompt_length=4)
    settings.update(change)
    with self.assertRaisesRegex(ValueError, message):
      denoise.DenoiseConfig(**settings)

  def test_equal_settings_are_equal_configs(self):
    cfg = dict(max_new_tokens=4, max_prompt_length=4)
    config = denoise.DenoiseConfig(**cfg, stop_ids=[2, 3])
    self.assertEqual(config.stop_ids, (2, 3))
    self.assertEqual(
        hash(config), hash(denoise.DenoiseConfig(**cfg, stop_ids=(2, 3)))
    )

  def test_bad_inputs_fail_before_compute(self):
    flash = _with_weights(lambda pure: None)
    flash.config = dataclasses.replace(flash.config, use_flash_attention=True)
    stochastic = _config(temperature=1.0)
    cases = [
        ("empty", lambda: _generate(_config(), prompts=[[1, 2], []])),
        (
            "more than max_prompt_length=10",
            lambda: _generate(_config(), prompts=[[1] * 11]),
        ),
        (
            "contains the mask token",
            lambda: _generate(_config(), prompts=[[1, _MASK]]),
        ),
        (
            "outside the vocabulary",
            lambda: _generate(_config(), prompts=[[1, 500]]),
        ),
        (
            "pass one seed per row",
            lambda: denoise.Denoiser(_QWEN3, bd=_BD, config=stochastic)(
                _PROMPTS
            ),
        ),
        (
            "seeds must be 3 ints",
            lambda: denoise.Denoiser(_QWEN3, bd=_BD, config=stochastic)(
                _PROMPTS, seeds=[1, 2]
            ),
        ),
        (
            "prompt_lengths is required",
            lambda: denoise.Denoiser(_QWEN3, bd=_BD, config=_config())(
                np.ones((2, 3), np.int32)
            ),
        ),
        (
            "mask_token_id=500 is outside the model vocabulary",
            lambda: denoise.Denoiser(
                _QWEN3,
                bd=bd_config.BlockDiffusionConfig(4, 500),
                config=_config(),
            )(_PROMPTS),
        ),
        (
            r"stop_ids / pad_id \[300\] are outside",
            lambda: _generate(_config(stop_id=300)),
        ),
        (
            "mask_token_id=127 equals stop_ids",
            lambda: _generate(_config(stop_id=_MASK)),
        ),
        (
            "use_flash_attention=True",
            lambda: _generate(_config(), model=flash),
        ),
        (
            "BlockDiffusionConfig",
            lambda: denoise.Denoiser(_QWEN3, bd={}, config=_config())(_PROMPTS),
        ),
    ]
    for message, call in cases:
      with self.subTest(message):
        with self.assertRaisesRegex(ValueError, message):
          call()

  def test_bad_trace_fails_validation(self):
    trace = _generate(_config()).trace.validate()
    steps = trace.action_step.copy()
    steps[0, :] = -1
    steps[0, -1] = 0  # A generated block after ungenerated ones.
    with self.assertRaisesRegex(ValueError, "-1 must be a tail"):
      trace.replace(action_step=steps).validate()
    steps = trace.action_step.copy()
    steps[1, :2] = [0, 2]  # Row 1's first block: step 1 commits nothing.
    with self.assertRaisesRegex(ValueError, "not 0..k-1"):
      trace.replace(action_step=steps).validate()
    with self.assertRaisesRegex(ValueError, "temperature"):
      trace.replace(temperature=0.0).validate()


if __name__ == "__main__":
  absltest.main()
