# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.distillation.evaluation: when the decode evaluation runs.

The evaluation itself runs end to end in recipes/opd_test.py; here, which
steps a Tunix training loop evaluates, whatever its checkpoint cadence. The
subject is the hooks' timing, so the trained model is a linear layer and
the evaluation reads its weights alone.
"""

import contextlib
import io

from absl.testing import absltest
from flax import nnx
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from tunix_bd import compat
from tunix_bd.distillation import evaluation
from tunix_bd.training import aux_metrics


def _kernel_sum(model) -> float:
  return float(jnp.sum(model.kernel[...]))


class _WeightsEvaluation(evaluation.DecodeEvaluation):
  """Evaluates the sum of the model's weights instead of its decoding."""

  def evaluate(self, model):
    return {"kernel_sum": _kernel_sum(model)}


class DecodeEvaluationTest(absltest.TestCase):

  def test_every_due_step_is_evaluated_at_that_step(self):
    # Checkpoints at steps 1 (the first) and 2 write their rows at once;
    # step 3 then ends without a hook call, Tunix's first-step skip.
    trainer = compat.PeftTrainer(
        nnx.Linear(2, 1, rngs=nnx.Rngs(0)),
        optax.sgd(0.1),
        compat.TrainingConfig(
            eval_every_n_steps=100,
            max_steps=4,
            checkpoint_root_directory=self.create_tempdir().full_path,
            checkpointing_options=ocp.CheckpointManagerOptions(
                save_interval_steps=2
            ),
        ),
    )
    aux_metrics.write_metrics_at_checkpoints(trainer)
    trainer.with_loss_fn(lambda model, x: jnp.mean(model(x) ** 2))
    trainer.with_gen_model_input_fn(lambda batch: {"x": batch["x"]})
    hook = _WeightsEvaluation(
        prompts=None,
        teacher=None,
        strategy=None,
        decode=None,
        thresholds=(),
        tokenizer=None,
        batch_size=1,
        every_n_steps=1,
    )
    kernels = {}
    record = hook.on_train_step_start

    def on_train_step_start(train_ctx):
      # The weights each step starts from: the previous step's.
      kernels[train_ctx.train_steps] = _kernel_sum(train_ctx.model)
      record(train_ctx)

    hook.on_train_step_start = on_train_step_start
    trainer.with_training_hooks(hook)
    with contextlib.redirect_stdout(io.StringIO()):
      trainer.train([{"x": np.ones((2, 2), np.float32)}] * 4)
    kernels[4] = _kernel_sum(trainer.model)
    self.assertEqual(
        hook.history,
        [(step, {"kernel_sum": kernels[step]}) for step in (1, 2, 3, 4)],
    )


if __name__ == "__main__":
  absltest.main()
