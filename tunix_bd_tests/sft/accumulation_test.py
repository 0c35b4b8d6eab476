# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Gradient accumulation with the SFT loss equals one big batch, exactly.

docs/design.md invariant 3, through a real Tunix `PeftTrainer` (whose 0.1.7
accumulation is `optax.MultiSteps`, a mean of micro-batch gradients) on a
tiny real Qwen3, with micro-batches of unequal corrupted-token counts.
"""

from absl.testing import absltest
from flax import nnx
import jax.numpy as jnp
import numpy as np
import optax
from tunix.sft import peft_trainer
from tunix_bd.core import bd_config
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.sft import micro_batches
from tunix_bd.sft import trainer as trainer_lib
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_MASK = _TOKENIZER.convert_tokens_to_ids(tokenizer_lib.MASK_TOKEN)
# The cheapest forward to compile; exactness does not depend on it.
_CONFIG = bd_config.BlockDiffusionConfig(
    block_size=8,
    mask_token_id=_MASK,
    alignment=bd_config.SAME_POSITION,
    layout=bd_config.SINGLE_CANVAS,
)


def _micro_batches(k: int) -> list[micro_batches.SftBatch]:
  """The k micro-batches of the first global batch (8 examples, 16 rows)."""
  batches = test_common.digit_task_sft_batches(
      _TOKENIZER, _CONFIG, mix_seed=11, gradient_accumulation_steps=k
  )
  return [batches[i] for i in range(k)]


def _params(model) -> dict[str, np.ndarray]:
  flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
  return {"/".join(map(str, path)): np.array(v[...]) for path, v in flat}


def _set_params(model, params: dict[str, np.ndarray]) -> None:
  state = nnx.state(model, nnx.Param)
  for path, variable in nnx.to_flat_state(state):
    variable[...] = jnp.asarray(params["/".join(map(str, path))])
  nnx.update(model, state)


def _mean_of_micro_batch_means(batch):
  """Rewrites a micro-batch so that the loss divides by its own weight.

  With `global_weight` = k * own weight, each micro-batch loss is its own
  weighted mean, and MultiSteps averages those means: the naive scheme.
  """
  own = np.where(batch.corruption_mask, batch.loss_weights, 0).sum()
  return batch.replace(
      global_weight=np.full_like(
          batch.global_weight, own * batch.accumulation_steps[0]
      )
  )


def _relative(x, y):
  return np.linalg.norm(x - y) / np.linalg.norm(y)


class GradientAccumulationTest(absltest.TestCase):

  def test_accumulated_update_equals_one_big_batch(self):
    model_config = test_common.tiny_qwen3_config(len(_TOKENIZER))
    new_model = lambda: test_common.init_qwen3(model_config, seed=1, scale=0.1)
    before = _params(new_model())
    # k = 2 holds the invariant for any k: MultiSteps means k gradients,
    # each scaled by its micro-batch's share of the global weight.
    updated, naive = {}, None
    for k in (1, 2):
      model = new_model()
      trainer = trainer_lib.DiffusionSftTrainer(
          model,
          optax.sgd(1.0),
          peft_trainer.TrainingConfig(
              eval_every_n_steps=100, gradient_accumulation_steps=k
          ),
          config=_CONFIG,
      )
      # Managed externally: no skipping, no closing; it runs every item.
      trainer.is_managed_externally = True
      micro = _micro_batches(k)
      trainer.train(micro)
      self.assertEqual(trainer.train_steps, 1)
      updated[k] = _params(model)
      if k == 1:
        continue
      # Unequal corrupted counts and weights: a mean of per-micro-batch
      # means would differ from one big batch.
      counts = [int(b.corruption_mask.sum()) for b in micro]
      weights = [float(b.loss_weights.sum()) for b in micro]
      self.assertLen(set(counts), k)
      self.assertGreater(max(weights) / min(weights), 1.1)
      # Control on the same compiled step: the naive scheme is caught.
      _set_params(model, before)
      for name, value in _params(model).items():
        np.testing.assert_array_equal(value, before[name])
      trainer.train([_mean_of_micro_batch_means(b) for b in micro])
      naive = _params(model)

    want = updated[1]
    delta = {name: want[name] - before[name] for name in want}
    scale = max(np.abs(d).max() for d in delta.values())
    self.assertGreater(scale, 1e-3)  # The update is not negligible.
    for name in want:
      # The parameters agree within 1e-6 (relative, per tensor); so do the
      # updates themselves, a far stricter check, within 1e-5.
      self.assertLess(_relative(updated[2][name], want[name]), 1e-6, name)
      self.assertLess(
          _relative(updated[2][name] - before[name], delta[name]), 1e-5, name
      )
    deviation = max(
        _relative(naive[name] - before[name], delta[name]) for name in want
    )
    self.assertGreater(deviation, 1e-2)


if __name__ == "__main__":
  absltest.main()
