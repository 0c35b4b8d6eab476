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

import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.distillation import wiring
from tunix_bd.run import models
from tunix_bd.run import sections
from tunix_bd.run import stage as stage_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import options


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
  template = stage.data.chat_template  # One override, for both.
  student_tok, bd = models.converted_tokenizer_and_bd(
      stage.model, "student", template
  )
  if stage.random_init:
    return student_tok, student_tok, bd
  teacher_tok = teacher_lib.load_tokenizer(
      stage.model.teacher, template, student_tok
  )
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
  chat_options, hf_files = stage.check_export("student", student_tok, bd)
  train_set, eval_set = dataset_lib.conversations(config.data)
  encode = lambda conversations: prompts_lib.encode_prompts(
      student_tok, conversations, stage.rollout.max_prompt_length, chat_options
  )
  train_prompts, eval_prompts = encode(train_set), encode(eval_set)
  fingerprint = check_fingerprint(stage, student_tok, teacher_tok, bd, stop_ids)

  mesh = mesh_lib.make_mesh(stage.mesh)
  student = models.load(stage.model, "student", mesh, seed=config.seed + 1)
  teacher = models.load(stage.model, "teacher", mesh, seed=config.seed)
  teacher_lib.check_teacher_model(teacher.config, student.config.vocab_size)
  bd.validate_for_model(
      student.config, pad_id=decode.pad_id, eos_id=None, stop_ids=stop_ids
  )
  trainer, evaluation = wiring.build_trainer(
      student,
      teacher,
      bd=bd,
      decode=decode,
      tokenizer=student_tok,
      train_prompts=train_prompts,
      eval_prompts=eval_prompts,
      opd=opd,
      train=train,
      budget=budget,
      corruption=stage.corruption,
      eval_settings=stage.eval,
      mesh=mesh,
      workdir=stage.workdir,
      seed=config.seed,
      logits_chunk=stage.model.precision.chunk,
      fingerprint=fingerprint,
  )
  with mesh_lib.tunix_context(mesh):
    stage.resumed(trainer.train_steps)
    before = evaluation.run(trainer, trainer.train_steps)
    stage.record()
    trainer.run()
    after = evaluation.final(trainer)

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
  evaluation_lib.write_report(
      stage.workdir,
      canvas=opd.canvas,
      steps=trainer.train_steps,
      before=before,
      after=after,
      export_dir=export_dir,
  )
  return after
