# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Exactness invariants of tunix_bd.generate.denoise (DESIGN.md 4 and 5).

4. Cached decoding equals cache-free decoding: identical tokens and commit
   steps, log-probs within 1e-5 (float32).
5. Batch invariance: a row decoded in a heterogeneous padded batch gives
   exactly what it gives alone, greedy and seeded stochastic.

Two geometries, each compiled once per path and batch size: shifted
alignment with block size 4, and same-position alignment with block size 3;
neither block size divides the prompt lengths or `max_new_tokens`.
"""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd.models import bd_config
from tunix_bd_tests import test_common

_MASK = 127
_QWEN3 = test_common.tiny_qwen3(vocab_size=128)
_SETUPS = {
    # (block size, alignment, prompts, max_prompt_length, max_new_tokens)
    "shifted": (
        4,
        bd_config.SHIFTED,
        [[5, 17, 33, 8, 91, 40, 12], [64, 3], [22, 9, 71, 15, 101, 44, 6, 30]],
        10,
        10,
    ),
    "same_position": (
        3,
        bd_config.SAME_POSITION,
        [[40, 2, 77, 19], [8], [90, 14, 61, 25, 33]],
        7,
        7,
    ),
}
_SEEDS = [21, 22, 23]
_RUNS = (
    dict(rule=commit_rules.THRESHOLD, threshold=0.6, temperature=0.0),
    dict(rule=commit_rules.FACTOR, factor=1.5, temperature=0.0),
    dict(rule=commit_rules.THRESHOLD, threshold=0.4, temperature=1.0),
    dict(rule=commit_rules.TOP_K, top_k=2, temperature=0.7),
)


def _decode(setup, use_cache, rows=(0, 1, 2), stop_id=1, **kwargs):
  block_size, alignment, prompts, max_prompt, max_new = _SETUPS[setup]
  bd = bd_config.BlockDiffusionConfig(
      block_size=block_size, mask_token_id=_MASK, alignment=alignment
  )
  config = denoise.DenoiseConfig(
      max_new_tokens=max_new,
      max_prompt_length=max_prompt,
      stop_ids=(stop_id,),
      use_cache=use_cache,
      **kwargs,
  )
  out = denoise.generate(
      _QWEN3,
      [prompts[r] for r in rows],
      bd=bd,
      config=config,
      seeds=[_SEEDS[r] for r in rows],
  )
  out.trace.validate()
  return out


def _stop_id(setup):
  """A token the rows commit, so that some rows stop early."""
  tokens = _decode(setup, True).completion_tokens
  return int(tokens[0, len(tokens[0]) // 2])


class DenoiseExactnessTest(parameterized.TestCase):

  @parameterized.product(setup=tuple(_SETUPS), run=_RUNS)
  def test_cached_equals_cache_free(self, setup, run):
    stop_id = _stop_id(setup)
    cached = _decode(setup, True, stop_id=stop_id, **run)
    free = _decode(setup, False, stop_id=stop_id, **run)
    for name in ("tokens", "action_step"):
      np.testing.assert_array_equal(
          getattr(cached.trace, name), getattr(free.trace, name), err_msg=name
      )
    np.testing.assert_allclose(
        cached.trace.action_logp, free.trace.action_logp, atol=1e-5, rtol=0
    )
    np.testing.assert_array_equal(cached.num_steps, free.num_steps)
    # The cache-free path has no cache writes.
    np.testing.assert_array_equal(free.num_forwards, free.num_steps)
    self.assertTrue((cached.num_forwards > cached.num_steps).all())

  @parameterized.product(setup=tuple(_SETUPS), run=_RUNS)
  def test_each_row_equals_its_solo_run(self, setup, run):
    stop_id = _stop_id(setup)
    batch = _decode(setup, True, stop_id=stop_id, **run)
    for row in range(3):
      solo = _decode(setup, True, rows=(row,), stop_id=stop_id, **run)
      for name in ("tokens", "action_step", "action_logp"):
        np.testing.assert_array_equal(
            getattr(solo.trace, name)[0],
            getattr(batch.trace, name)[row],
            err_msg=f"row {row} {name}",
        )
      np.testing.assert_array_equal(
          solo.num_forwards[0], batch.num_forwards[row]
      )
    print(setup, run, "stopped rows:", (batch.trace.action_step < 0).any(1))


if __name__ == "__main__":
  absltest.main()
