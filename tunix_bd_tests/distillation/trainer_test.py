# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""`OpdTrainer` through Tunix's real `DistillationTrainer` loop.

docs/design.md "OPD invariants": field dropping (20), gradient
accumulation 2 equals 1 on the same rollouts (18), and resume equals
uninterrupted (docs/design.md invariant 7), on tiny real Qwen3 students
and teachers.
"""

import os

from absl.testing import absltest
from flax import nnx
import numpy as np
import optax
import orbax.checkpoint as ocp
from tunix.distillation import distillation_trainer
from tunix.sft import peft_trainer
from tunix_bd.core import bd_config
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tasks as tasks_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.distillation import wiring
from tunix_bd.generate import denoise
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd_tests import test_common

_TOKENIZER = tokenizer_lib.build_char_tokenizer()
_BD = bd_config.BlockDiffusionConfig(block_size=4, mask_token_id=3)
_PROMPTS = prompts_lib.encode_prompts(
    _TOKENIZER,
    dataset_lib.embedded_conversations(
        tasks_lib.TaskMix(max_len=3), "train", 16
    ),
    32,
)


def _params(model) -> list[np.ndarray]:
  flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
  return [np.array(v[...]) for _, v in flat]


class RecordingStrategy(strategy_lib.DiffusionOpdStrategy):
  """Records what the jitted step receives (types only)."""

  seen = []

  def get_train_loss(self, student_model, teacher_output, inputs):
    self.seen.append((type(inputs["batch"]), type(teacher_output)))
    return super().get_train_loss(student_model, teacher_output, inputs)


def _train(
    canvas=sources.TRACE,
    batch_size=4,
    accumulation=1,
    max_steps=1,
    checkpoint_dir=None,
    strategy_cls=strategy_lib.DiffusionOpdStrategy,
):
  student = test_common.tiny_qwen3(256, seed=0, embed_dim=32)
  teacher = test_common.tiny_qwen3(256, seed=1, embed_dim=32)
  decode = denoise.DenoiseConfig(
      max_new_tokens=8,
      max_prompt_length=32,
      threshold=0.5,
      temperature=1.0,
      stop_ids=(_TOKENIZER.eos_token_id,),
      pad_id=_TOKENIZER.pad_token_id,
  )
  source = sources.StudentRolloutSource(
      _PROMPTS,
      bd=_BD,
      decode=decode,
      canvas=canvas,
      batch_size=batch_size,
      gradient_accumulation_steps=accumulation,
      max_steps=max_steps,
      seed=0,
      eos_id=_TOKENIZER.eos_token_id,
      corruption=corruption_lib.SftCorruptionConfig(),
  )
  config = peft_trainer.TrainingConfig(
      eval_every_n_steps=1000,
      max_steps=max_steps,
      gradient_accumulation_steps=accumulation if accumulation > 1 else None,
      max_inflight_computations=1,
      checkpoint_root_directory=checkpoint_dir,
      checkpointing_options=ocp.CheckpointManagerOptions(save_interval_steps=1),
  )
  trainer = wiring.OpdTrainer(
      student,
      teacher,
      strategy_cls(bd=_BD, vocab_size=256, canvas=canvas),
      optax.sgd(0.5),
      config,
      source=source,
  )
  trainer.run()
  return trainer


class OpdTrainerTest(absltest.TestCase):

  def test_fields_ride_in_teacher_output_and_rollouts_use_live_weights(self):
    # Tunix 0.1.7 rebuilds batches as a plain TrainingInput: a regression
    # test that our fields arrive through `teacher_output`, not the batch.
    self.assertEqual(
        list(distillation_trainer.TrainingInput.__dataclass_fields__),
        ["input_tokens", "input_mask", "images", "teacher_output"],
    )
    RecordingStrategy.seen.clear()
    trainer = _train(max_steps=2, strategy_cls=RecordingStrategy)
    self.assertEqual(trainer.train_steps, 2)
    self.assertEqual(
        RecordingStrategy.seen[0],
        (distillation_trainer.TrainingInput, strategy_lib.OpdTargets),
    )

    # The source's denoiser reads the trained weights, not the initial ones.
    source = trainer.data_hooks
    index, seeds = source.prompt_indices(5), source.rollout_seeds(5)
    prompts = (_PROMPTS.tokens[index], _PROMPTS.lengths[index])
    live = source.rollout(trainer.model, step=5).trace.action_logp
    fresh = denoise.Denoiser(trainer.model, bd=_BD, config=source.decode)
    np.testing.assert_array_equal(
        live, fresh(*prompts, seeds=seeds).trace.action_logp
    )
    start = test_common.tiny_qwen3(256, seed=0, embed_dim=32)
    stale = denoise.Denoiser(start, bd=_BD, config=source.decode)
    self.assertFalse(
        np.allclose(live, stale(*prompts, seeds=seeds).trace.action_logp)
    )

  def test_accumulation_2_equals_1(self):
    one = _params(_train(sources.CORRUPTED, batch_size=4).model)
    two = _params(_train(sources.CORRUPTED, batch_size=2, accumulation=2).model)
    start = _params(test_common.tiny_qwen3(256, seed=0, embed_dim=32))
    moved = max(float(np.abs(a - s).max()) for a, s in zip(one, start))
    self.assertGreater(moved, 1e-4)
    for a, b in zip(one, two):
      np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)

  def test_resume_equals_uninterrupted(self):
    root = self.create_tempdir().full_path
    straight = _train(max_steps=2, checkpoint_dir=os.path.join(root, "a"))
    resumed_dir = os.path.join(root, "b")
    _train(max_steps=1, checkpoint_dir=resumed_dir)
    resumed = _train(max_steps=2, checkpoint_dir=resumed_dir)
    self.assertEqual(resumed.train_steps, 2)
    for a, b in zip(_params(straight.model), _params(resumed.model)):
      np.testing.assert_allclose(a, b, atol=1e-6)

  def test_mismatched_accumulation_fails_before_training(self):
    with self.assertRaisesRegex(ValueError, "gradient_accumulation_steps"):
      source = sources.StudentRolloutSource(
          _PROMPTS,
          bd=_BD,
          decode=denoise.DenoiseConfig(max_new_tokens=8, max_prompt_length=32),
          canvas=sources.TRACE,
          batch_size=2,
          gradient_accumulation_steps=2,
          max_steps=1,
          seed=0,
          eos_id=_TOKENIZER.eos_token_id,
      )
      wiring.OpdTrainer(
          test_common.tiny_qwen3(256),
          test_common.tiny_qwen3(256, seed=1),
          strategy_lib.DiffusionOpdStrategy(bd=_BD, vocab_size=256),
          optax.sgd(0.1),
          peft_trainer.TrainingConfig(
              eval_every_n_steps=10, max_steps=1, max_inflight_computations=1
          ),
          source=source,
      )


if __name__ == "__main__":
  absltest.main()
