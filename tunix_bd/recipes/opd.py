# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Recipe `opd`: on-policy distillation of an AR teacher into the student.

Tunix's `DistillationTrainer` with tunix_bd's rollout source, strategy and
decode evaluation (`tunix_bd.distillation`; docs/design.md, "OPD"). Also
writes `report.json` (decode metrics before and after) and `export/`.
"""

from __future__ import annotations

import dataclasses
import os

import ml_collections

from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.distillation import wiring
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import sections
from tunix_bd.run import models
from tunix_bd.run import sources as sources_lib
from tunix_bd.run import stage as stage_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import options


@dataclasses.dataclass(frozen=True)
class OpdConfig:
  """The recipe's typed sections (`run.stage.Stage`), in check order."""

  model: sections.OpdModel
  data: data_settings.Data
  rollout: generate_settings.OpdRollout
  opd: settings_lib.OpdSettings
  corruption: corruption_lib.SftCorruptionConfig
  train: options.TimedTrain
  eval: options.DecodeEval
  export: sections.ExportSettings
  mesh: mesh_lib.MeshSettings


def validate(config: ml_collections.ConfigDict) -> stage_lib.Stage[OpdConfig]:
  """Fails closed on settings that cannot work, before any compute."""
  return stage_lib.Stage(config, OpdConfig)


def read_sources(stage: stage_lib.Stage[OpdConfig]):
  """`(student_sources, teacher_tokenizer)`, checked before any compute (a
  random run's teacher has the student's tokenizer)."""
  settings = stage.settings
  student = sources_lib.read_converted(stage, "student", settings.rollout)
  if stage.random_init:
    return student, student.tokenizer
  teacher_dir = settings.model.teacher
  tokenizer = tokenizer_lib.load_tokenizer(
      teacher_dir, settings.data.chat_template, key="model.teacher"
  )
  teacher_lib.check_compatible(teacher_dir, tokenizer, student.tokenizer)
  return student, tokenizer


def check_fingerprint(stage, sources, teacher_tokenizer) -> dict:
  """The run fingerprint by the one rule, plus what the sources give."""
  teacher_digest = fingerprint_lib.tokenizer_digest(teacher_tokenizer)
  return stage.check_fingerprint(
      **sources.fingerprint_fields("tokenizer.student"),
      **{"tokenizer.teacher": teacher_digest},
  )


@stage_lib.launch
def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Distills, exports and returns the final decode metrics."""
  stage = validate(config)
  settings = stage.settings
  train = settings.train
  sources, teacher_tokenizer = read_sources(stage)
  # Rendered and encoded as the student reads (its export's chat switches);
  # a conversation's last assistant turn is re-generated.
  train_prompts, eval_prompts = (
      sources.encode_prompts(split, settings.rollout.max_prompt_length)
      for split in dataset_lib.conversations(settings.data)
  )
  fingerprint = check_fingerprint(stage, sources, teacher_tokenizer)

  mesh = mesh_lib.make_mesh(settings.mesh)
  student = models.load(settings.model, "student", mesh, seed=config.seed + 1)
  teacher = models.load(settings.model, "teacher", mesh, seed=config.seed)
  teacher_lib.check_teacher_model(teacher.config, student.config.vocab_size)
  sources.validate_for_model(student.config)
  with stage.restoring():  # The newest checkpoint, one line if bad.
    trainer, evaluation = wiring.build_trainer(
        student,
        teacher,
        student_sources=sources,
        train_prompts=train_prompts,
        eval_prompts=eval_prompts,
        opd=settings.opd,
        train=train,
        corruption=settings.corruption,
        eval_settings=settings.eval,
        mesh=mesh,
        workdir=stage.workdir,
        seed=config.seed,
        logits_chunk=settings.model.chunk,
        fingerprint=fingerprint,
    )
  with mesh_lib.tunix_context(mesh):
    stage.resumed(trainer.train_steps)
    before = evaluation.before(trainer, stage.workdir)
    stage.record()
    trainer.run()
    stage.stopped(trainer.train_steps)
    after = evaluation.final(trainer)

  export_dir = sources.export.write(
      trainer.model,
      sources.tokenizer,
      sources.bd,
      stop_ids=settings.rollout.extra_stop_ids,
      extra={
          "distilled": stage.provenances("student", "teacher"),
          "opd": dataclasses.asdict(settings.opd),
          "precision": settings.model.provenance(),
      },
  )
  steps = trainer.train_steps
  report = {"steps": steps, "before": before, "after": after}
  report_lib.write_json(os.path.join(stage.workdir, "report.json"), report)
  print(f"opd ({settings.opd.canvas}): {steps} steps")
  for name in before:
    print(f"  {name:<28} {before[name]:8.3f} -> {after[name]:8.3f}")
  print(f"  student exported to {export_dir}")
  return after
