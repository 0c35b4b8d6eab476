# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""The exactness invariants of block denoising (docs/design.md invariants 4, 5).

4. Cached decoding equals cache-free decoding: identical tokens and commit
   steps, log-probs within 1e-5 (float32).
5. Batch invariance: a row decoded in a heterogeneous padded batch gives
   exactly what it gives alone, greedy and seeded stochastic.

`ExactnessTests` is mixed into one test module per geometry, so that each
module compiles the decoder only three times (cached and cache-free batches,
one solo batch size) and stays fast.
"""

import numpy as np
from tunix_bd.core import bd_config
from tunix_bd.generate import commit_rules
from tunix_bd.generate import denoise
from tunix_bd_tests import test_common

MASK = 127
_QWEN3 = test_common.tiny_qwen3(vocab_size=128)
_SEEDS = (21, 22, 23)
# Rules and temperatures are runtime values: no recompiles.
RUNS = (
    dict(rule=commit_rules.THRESHOLD, threshold=0.6, temperature=0.0),
    dict(rule=commit_rules.FACTOR, factor=1.5, temperature=0.0),
    dict(rule=commit_rules.THRESHOLD, threshold=0.4, temperature=1.0),
    dict(rule=commit_rules.TOP_K, top_k=2, temperature=0.7),
)


def assert_same_trace(cached, free) -> None:
  """Invariant 4 on two `DenoiseOutput`s of the same rows.

  Tokens and commit steps identical, log-probs within 1e-5 (float32), the
  same forwards per row.
  """
  for name in ("tokens", "action_step"):
    np.testing.assert_array_equal(
        getattr(cached.trace, name), getattr(free.trace, name), err_msg=name
    )
  np.testing.assert_allclose(
      cached.trace.action_logp, free.trace.action_logp, atol=1e-5, rtol=0
  )
  np.testing.assert_array_equal(cached.num_forwards, free.num_forwards)


class ExactnessTests:
  """Invariants 4 and 5 for the geometry in `SETUP`.

  Attributes:
    SETUP: dict with `block_size`, `alignment`, `prompts` (three rows of
      different lengths), `max_prompt_length` and `max_new_tokens`.
    SOLO_USE_CACHE: the decoding path of the batch-invariance test.
  """

  SETUP: dict
  SOLO_USE_CACHE: bool

  def _decode(self, use_cache, rows=(0, 1, 2), stop_id=1, **run):
    setup = self.SETUP
    bd = bd_config.BlockDiffusionConfig(
        block_size=setup["block_size"],
        mask_token_id=MASK,
        alignment=setup["alignment"],
    )
    config = denoise.DenoiseConfig(
        max_new_tokens=setup["max_new_tokens"],
        max_prompt_length=setup["max_prompt_length"],
        stop_ids=(stop_id,),
        use_cache=use_cache,
        **run,
    )
    out = denoise.generate(
        _QWEN3,
        [setup["prompts"][r] for r in rows],
        bd=bd,
        config=config,
        seeds=[_SEEDS[r] for r in rows],
    )
    out.trace.validate()
    return out

  def _stop_id(self, use_cache, run):
    """Row 0's first completion token: row 0 stops after its first block."""
    return int(self._decode(use_cache, **run).completion_tokens[0, 0])

  def test_cached_equals_cache_free(self):
    for run in RUNS:
      with self.subTest(**run):
        stop_id = self._stop_id(True, run)
        cached = self._decode(True, stop_id=stop_id, **run)
        free = self._decode(False, stop_id=stop_id, **run)
        self.assertTrue((cached.trace.action_step[0] < 0).any())
        assert_same_trace(cached, free)
        np.testing.assert_array_equal(cached.num_steps, free.num_steps)
        # The cached path writes the cache within its denoising forwards.
        np.testing.assert_array_equal(free.num_forwards, free.num_steps)
        np.testing.assert_array_equal(cached.num_forwards, cached.num_steps)

  def test_each_row_equals_its_solo_run(self):
    use_cache = self.SOLO_USE_CACHE
    for run in RUNS:
      with self.subTest(**run):
        stop_id = self._stop_id(use_cache, run)
        batch = self._decode(use_cache, stop_id=stop_id, **run)
        for row in range(3):
          solo = self._decode(use_cache, rows=(row,), stop_id=stop_id, **run)
          for name in ("tokens", "action_step", "action_logp"):
            np.testing.assert_array_equal(
                getattr(solo.trace, name)[0],
                getattr(batch.trace, name)[row],
                err_msg=f"row {row} {name}",
            )
          self.assertEqual(solo.num_forwards[0], batch.num_forwards[row])
