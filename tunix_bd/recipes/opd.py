# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `opd`: on-policy distillation of an AR teacher into the student.

Tunix's `DistillationTrainer` with tunix_bd's student-rollout source,
strategy and decode evaluation (`tunix_bd.distillation`). Every input is
checked before any compute: both checkpoints, their tokenizers, the stop
ids, every prompt, the fingerprint of a run being resumed.

Outputs under `config.workdir`: `checkpoints/` (orbax; resume is automatic
and guarded by the run fingerprint), `tensorboard/`, `metrics.jsonl`,
`report.json` (decode metrics before and after) and `export/`.
"""

from __future__ import annotations

import dataclasses
import os

import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.distillation import trainer as trainer_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.models import bd_formats_export
from tunix_bd.run import models
from tunix_bd.run import sections
from tunix_bd.run import stage as stage_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import hook_chain
from tunix_bd.training import options
from tunix_bd.training import progress


def validate(config: ml_collections.ConfigDict) -> stage_lib.Stage:
  """Fails closed on settings that cannot work, before any compute."""
  return stage_lib.Stage(
      config,
      model=sections.OpdModelSettings,
      data=data_settings.DataSettings,
      rollout=settings_lib.RolloutSettings,
      opd=settings_lib.OpdSettings,
      corruption=corruption_lib.SftCorruptionConfig,
      train=(options.TrainSettings, options.TimeBudget),
      eval=settings_lib.EvalSettings,
      export=sections.ExportSettings,
      mesh=mesh_lib.MeshSettings,
  )


def tokenizers_and_bd(stage: stage_lib.Stage):
  """`(student_tokenizer, teacher_tokenizer, bd)`, checked."""
  # One template override for both, so the teacher scores the prompts as
  # rendered.
  template = stage.data.chat_template
  student_tok, bd = models.converted_tokenizer_and_bd(
      stage.model, "student", template
  )
  if stage.random_init:
    return student_tok, student_tok, bd
  teacher = stage.model.teacher
  teacher_tok = tokenizer_lib.load_tokenizer(
      teacher, template, key="model.teacher"
  )
  teacher_lib.check_compatible(teacher, teacher_tok, student_tok)
  return student_tok, teacher_tok, bd


def check_fingerprint(stage, student_tok, teacher_tok, bd, stop_ids) -> dict:
  """The run fingerprint by the one rule, plus what the sources give."""
  return stage.check_fingerprint(
      **{
          "tokenizer.student": fingerprint_lib.tokenizer_digest(student_tok),
          "tokenizer.teacher": fingerprint_lib.tokenizer_digest(teacher_tok),
      },
      bd=bd.to_dict(),
      stop_ids=list(stop_ids),
  )


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Distills, exports and returns the final decode metrics."""
  stage = validate(config)
  (train, budget), opd = stage.train, stage.opd
  student_tok, teacher_tok, bd = tokenizers_and_bd(stage)
  stop_ids = stage.rollout.stop_ids(student_tok)
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=student_tok.pad_token_id,
      stop_ids=stop_ids,
  )
  decode = stage.rollout.denoise_config(student_tok)
  # The student renders prompts as it was trained to (its export's record).
  chat_options = models.trained_chat_options(
      stage.model, "student", stage.data.chat_options
  )
  hf_files = models.hf_files(stage.model, "student")  # What the export keeps.
  bd_formats_export.check_run(
      stage.export,
      bd=bd,
      tokenizer=student_tok,
      source=hf_files,
      scratch=config.model.scratch,
  )
  train_set, eval_set = dataset_lib.conversations(config.data)
  encode = lambda conversations: prompts_lib.encode_prompts(
      student_tok, conversations, stage.rollout.max_prompt_length, chat_options
  )
  train_prompts, eval_prompts = encode(train_set), encode(eval_set)
  fingerprint = check_fingerprint(stage, student_tok, teacher_tok, bd, stop_ids)

  mesh = mesh_lib.make_mesh(stage.mesh)
  load = lambda key, seed: models.load(stage.model, key, mesh, seed=seed)
  student, teacher = load("student", config.seed + 1), load(
      "teacher", config.seed
  )
  teacher_lib.check_teacher_model(teacher.config, student.config.vocab_size)
  bd.validate_for_model(
      student.config, pad_id=decode.pad_id, eos_id=None, stop_ids=stop_ids
  )
  strategy = strategy_lib.DiffusionOpdStrategy(
      bd=bd,
      vocab_size=student.config.vocab_size,
      canvas=opd.canvas,
      temperature=opd.temperature,
      hard_loss_weight=opd.hard_loss_weight,
      logits_chunk=stage.model.precision.chunk,
  )
  source = sources.StudentRolloutSource(
      train_prompts,
      bd=bd,
      decode=decode,
      canvas=opd.canvas,
      batch_size=train.batch_size,
      gradient_accumulation_steps=train.gradient_accumulation_steps or 1,
      max_steps=train.max_steps,
      seed=config.seed,
      eos_id=student_tok.eos_token_id,
      corruption=stage.corruption,
      time_budget_s=budget.seconds,
  )
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=eval_prompts,
      teacher=teacher,
      strategy=strategy,
      decode=decode,
      thresholds=stage.eval.thresholds,
      tokenizer=student_tok,
      batch_size=stage.eval.batch_size,
      every_n_steps=train.eval_every_n_steps,
  )
  # The source serves no eval batches, so Tunix runs no loss evaluation;
  # `train.eval_every_n_steps` paces the decode evaluation instead.
  description = f"On-policy distillation ({opd.canvas})"
  training_config = options.training_config(train, stage.workdir, description)
  training_config.max_inflight_computations = 1
  with mesh_lib.tunix_context(mesh):
    trainer = trainer_lib.OpdTrainer(
        student,
        teacher,
        strategy,
        options.optimizer(train),
        training_config,
        source=source,
        fingerprint=fingerprint,
        # A step's progress line, then the evaluation due after it.
        training_hooks=hook_chain.HookChain(
            progress.ProgressLines(description), evaluation
        ),
    )
    stage.resumed(trainer.train_steps)
    before = evaluation.run(trainer, trainer.train_steps)
    stage.record()
    trainer.run()
    after = evaluation.history[-1][1]
    if evaluation.history[-1][0] != trainer.train_steps:
      after = evaluation.run(trainer, trainer.train_steps)

  distilled_from = (
      {"random_init": True}
      if stage.random_init
      else {key: stage.provenance(key) for key in ("student", "teacher")}
  )
  export_dir = stage.export_block_diffusion(
      trainer.model,
      student_tok,
      bd=bd,
      chat_options=chat_options,
      source=hf_files,
      stop_ids=stage.rollout.extra_stop_ids,
      extra={
          "distilled": distilled_from,
          "opd": dataclasses.asdict(opd),
          "precision": stage.model.precision.provenance(),
      },
  )
  report = {"steps": trainer.train_steps, "before": before, "after": after}
  report_lib.write_json(os.path.join(stage.workdir, "report.json"), report)
  lines = [f"opd ({opd.canvas}): {trainer.train_steps} steps"]
  lines += [
      f"  {name:<28} {before[name]:8.3f} -> {after[name]:8.3f}"
      for name in before
  ]
  lines.append(f"  student exported to {export_dir}")
  print("\n".join(lines))
  return after
