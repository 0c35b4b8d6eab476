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

from tunix_bd import config_utils
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import special_ids
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.distillation import evaluation as evaluation_lib
from tunix_bd.distillation import settings as settings_lib
from tunix_bd.distillation import sources
from tunix_bd.distillation import strategy as strategy_lib
from tunix_bd.distillation import teacher as teacher_lib
from tunix_bd.distillation import trainer as trainer_lib
from tunix_bd.evaluation import report as report_lib
from tunix_bd.generate import settings as decode_settings
from tunix_bd.models import bd_export
from tunix_bd.models import bd_formats
from tunix_bd.models import bd_formats_export
from tunix_bd.models import export
from tunix_bd.models import from_scratch
from tunix_bd.models import hf_source
from tunix_bd.models import mask_token as mask_token_lib
from tunix_bd.models import precision as precision_lib
from tunix_bd.run import provenance
from tunix_bd.run import workdir as workdir_lib
from tunix_bd.sft import corruption as corruption_lib
from tunix_bd.training import hook_chain
from tunix_bd.training import options
from tunix_bd.training import progress


def validate(
    config: ml_collections.ConfigDict,
) -> tuple[options.TrainSettings, settings_lib.TimeBudget]:
  """Fails closed on settings that cannot work, before any compute.

  Returns:
    The `train` section as settings: `TrainSettings` and the time budget
    (`distillation.settings.train_settings`).
  """
  workdir_lib.check(config.workdir)
  for key in ("max_new_tokens", "max_prompt_length"):
    config_utils.check_int(f"rollout.{key}", config.rollout[key], 1)
  for name in ("rule", "threshold", "temperature", "use_cache"):
    decode_settings.check_denoise_setting(
        f"rollout.{name}", name, config.rollout[name]
    )
  special_ids.check_distinct(
      special_ids.EXTRA_STOP_IDS_KEY, config.rollout.extra_stop_ids
  )
  corruption_lib.SftCorruptionConfig.from_config_dict(config.corruption)
  config_utils.check_int("eval.batch_size", config.eval.batch_size, 1)
  hf_source.check_dtype(config.export.dtype, "export.dtype")
  bd_formats_export.check_options(config.export)
  if config.opd.canvas not in sources.CANVASES:
    raise ValueError(
        f"opd.canvas must be one of {sources.CANVASES}, got"
        f" {config.opd.canvas!r}."
    )
  thresholds = config.eval.thresholds
  if not thresholds or not all(
      isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t <= 1
      for t in thresholds
  ):
    raise ValueError(
        "eval.thresholds must be numbers in (0, 1], got"
        f" {config.eval.thresholds!r}."
    )
  precision_lib.from_section(config.model)
  if config.model.random_init:
    config_utils.from_section(
        from_scratch.ScratchModelSettings, config.model.scratch, "model.scratch"
    )
  else:
    for key in ("student", "teacher"):
      _check_model_directory(key, config.model[key])
  return settings_lib.train_settings(config.train)


def _check_model_directory(key: str, path: str) -> None:
  """Fails closed on a missing `model.{key}`, naming the key to set."""
  if os.path.isdir(path):
    return
  what = (
      "the converted student (e.g. runs/quickstart/sft/export, or sft.py's"
      " workdir/export)"
      if key == "student"
      else (
          "the AR teacher (e.g. runs/quickstart/ar_pretrain/export, or"
          " ar_pretrain.py's workdir/export)"
      )
  )
  found = []
  if key == "student":
    found = export.find_block_diffusion_exports("runs")
  hint = f"; converted models under runs/: {', '.join(found)}" if found else ""
  raise ValueError(
      f"model.{key}={path!r} is not a directory: set"
      f" --config.model.{key}=DIR to {what}{hint}. On the embedded default,"
      " `tunix run --plugin tunix_bd quickstart.py` makes both."
  )


def _tokenizers_and_bd(config):
  """`(student_tokenizer, teacher_tokenizer, bd)`, checked."""
  if config.model.random_init:
    tokenizer, bd = mask_token_lib.embedded_tokenizer_and_bd(
        **config.model.scratch_bd.to_dict()
    )
    tokenizer_lib.override_chat_template(tokenizer, config.data.chat_template)
    return tokenizer, tokenizer, bd
  # One override for both, so the teacher scores the prompts as rendered.
  template = config.data.chat_template
  student_tok = bd_formats.load_tokenizer(
      config.model.student, template, key="model.student"
  )
  teacher_tok = tokenizer_lib.load_tokenizer(
      config.model.teacher, template, key="model.teacher"
  )
  teacher_lib.check_compatible(config.model.teacher, teacher_tok, student_tok)
  return (
      student_tok,
      teacher_tok,
      bd_formats.load_settings(config.model.student, "model.student"),
  )


def run_fingerprint(
    config, student_tok, teacher_tok, bd, stop_ids, train, budget
):
  """Every setting that changes what this run's checkpoints mean.

  `train` and `budget` (the `train` section's two settings) enter by
  `fingerprint.settings_fields`, as in every recipe.
  """
  models = provenance.model_fields(config.model, ("student", "teacher"))
  train = {
      **fingerprint_lib.settings_fields(train),
      **fingerprint_lib.settings_fields(budget),
  }
  return fingerprint_lib.fingerprint({
      "recipe": config.recipe,
      **models,
      **precision_lib.from_section(config.model).fingerprint_fields(),
      "tokenizer.student": fingerprint_lib.tokenizer_digest(student_tok),
      "tokenizer.teacher": fingerprint_lib.tokenizer_digest(teacher_tok),
      "bd": bd.to_dict(),
      "rollout": config.rollout.to_dict(),
      "stop_ids": list(stop_ids),
      "opd": config.opd.to_dict(),
      "corruption": config.corruption.to_dict(),
      "data": provenance.data_fields(config.data.to_dict()),
      "train": train,
      "seed": config.seed,
  })


def _models(config, mesh, precision):
  if config.model.random_init:
    make = lambda seed: from_scratch.embedded_model(
        config.model.scratch, seed, mesh, precision
    )
    return make(config.seed + 1), make(config.seed)
  load = lambda key: precision_lib.load(
      config.model[key], precision, mesh=mesh
  )[0]
  with mesh_lib.tunix_context(mesh):
    return load("student"), load("teacher")


def run(config: ml_collections.ConfigDict) -> dict[str, float]:
  """Distills, exports and returns the final decode metrics."""
  train, budget = validate(config)
  student_tok, teacher_tok, bd = _tokenizers_and_bd(config)
  stop_ids = special_ids.stop_ids(
      student_tok.eos_token_id, config.rollout.extra_stop_ids
  )
  special_ids.check(
      mask_token_id=bd.mask_token_id,
      pad_id=student_tok.pad_token_id,
      stop_ids=stop_ids,
  )
  # The student renders prompts as it was trained to (its export's record).
  chat_options = chat.trained_options(
      None
      if config.model.random_init
      else bd_formats.load_extra(config.model.student, chat.SETTINGS_KEY),
      chat.options_from_data(config.data),
  )
  student_files = (
      None if config.model.random_init else hf_source.read(config.model.student)
  )
  bd_formats_export.check_run(
      config.export,
      bd=bd,
      tokenizer=student_tok,
      source=student_files,
      scratch=config.model.scratch,
  )
  train_set, eval_set = dataset_lib.conversations(config.data)
  max_prompt = config.rollout.max_prompt_length
  train_prompts = prompts_lib.encode_prompts(
      student_tok, train_set, max_prompt, chat_options
  )
  eval_prompts = prompts_lib.encode_prompts(
      student_tok, eval_set, max_prompt, chat_options
  )
  fingerprint = run_fingerprint(
      config, student_tok, teacher_tok, bd, stop_ids, train, budget
  )
  workdir_lib.check_fingerprint(config.workdir, fingerprint)

  mesh = mesh_lib.from_section(config.mesh)
  precision = precision_lib.from_section(config.model)
  student, teacher = _models(config, mesh, precision)
  teacher_lib.check_teacher_model(teacher.config, student.config.vocab_size)
  decode = decode_settings.denoise_config(
      student_tok,
      max_prompt,
      max_new_tokens=config.rollout.max_new_tokens,
      rule=config.rollout.rule,
      threshold=config.rollout.threshold,
      temperature=config.rollout.temperature,
      use_cache=config.rollout.use_cache,
  )
  decode = dataclasses.replace(decode, stop_ids=stop_ids)
  bd.validate_for_model(
      student.config, pad_id=decode.pad_id, eos_id=None, stop_ids=stop_ids
  )
  strategy = strategy_lib.DiffusionOpdStrategy(
      bd=bd,
      vocab_size=student.config.vocab_size,
      canvas=config.opd.canvas,
      temperature=config.opd.temperature,
      hard_loss_weight=config.opd.hard_loss_weight,
      logits_chunk=precision.chunk,
  )
  source = sources.StudentRolloutSource(
      train_prompts,
      bd=bd,
      decode=decode,
      canvas=config.opd.canvas,
      batch_size=train.batch_size,
      gradient_accumulation_steps=train.gradient_accumulation_steps or 1,
      max_steps=train.max_steps,
      seed=config.seed,
      eos_id=student_tok.eos_token_id,
      corruption=corruption_lib.SftCorruptionConfig.from_config_dict(
          config.corruption
      ),
      time_budget_s=budget.seconds,
  )
  evaluation = evaluation_lib.DecodeEvaluation(
      prompts=eval_prompts,
      teacher=teacher,
      strategy=strategy,
      decode=decode,
      thresholds=tuple(config.eval.thresholds),
      tokenizer=student_tok,
      batch_size=config.eval.batch_size,
      every_n_steps=train.eval_every_n_steps,
  )
  # The source serves no eval batches, so Tunix runs no loss evaluation;
  # `train.eval_every_n_steps` paces the decode evaluation instead.
  description = f"On-policy distillation ({config.opd.canvas})"
  training_config = options.training_config(train, config.workdir, description)
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
    workdir_lib.resumed(config.workdir, trainer.train_steps, recipe="opd")
    before = evaluation.run(trainer, trainer.train_steps)
    workdir_lib.record_fingerprint(config.workdir, fingerprint)
    trainer.run()
    after = evaluation.history[-1][1]
    if evaluation.history[-1][0] != trainer.train_steps:
      after = evaluation.run(trainer, trainer.train_steps)

  export_dir = os.path.join(config.workdir, "export")
  distilled_from = (
      {"random_init": True}
      if config.model.random_init
      else {
          key: provenance.identify(config.model[key]).provenance()
          for key in ("student", "teacher")
      }
  )
  bd_export.export_block_diffusion(
      trainer.model,
      student_tok,
      export_dir,
      bd=bd,
      chat_options=chat_options,
      source=student_files,
      dtype=config.export.dtype,
      fmt=config.export.format,
      reference_code=config.export.reference_code,
      stop_ids=config.rollout.extra_stop_ids,
      extra={
          "distilled": distilled_from,
          "opd": config.opd.to_dict(),
          "precision": precision.provenance(),
      },
  )
  report = {"steps": trainer.train_steps, "before": before, "after": after}
  report_lib.write_json(os.path.join(config.workdir, "report.json"), report)
  lines = [f"opd ({config.opd.canvas}): {trainer.train_steps} steps"]
  lines += [
      f"  {name:<28} {before[name]:8.3f} -> {after[name]:8.3f}"
      for name in before
  ]
  lines.append(f"  student exported to {export_dir}")
  print("\n".join(lines))
  return after
