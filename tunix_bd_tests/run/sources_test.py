# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.run.sources: a converted model's sources, read once."""

import dataclasses
import errno
import os
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
from tunix_bd import config_files
from tunix_bd import mesh as mesh_lib
from tunix_bd.core import bd_config
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.data import chat
from tunix_bd.data import dataset as dataset_lib
from tunix_bd.data import prompts as prompts_lib
from tunix_bd.data import settings as data_settings
from tunix_bd.data import tokenizer as tokenizer_lib
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import bd_export
from tunix_bd.models import export
from tunix_bd.models import export_plan
from tunix_bd.models import hf_checkpoint
from tunix_bd.models import mask_token
from tunix_bd.models import sections
from tunix_bd.run import models
from tunix_bd.run import sources as sources_lib
from tunix_bd.run import stage as stage_lib
from tunix_bd_tests import test_common
from tunix_bd_tests.run import run_test_common


def _sources(extra_stop_ids=()) -> sources_lib.ConvertedSources:
  tokenizer, bd = mask_token.embedded_tokenizer_and_bd(block_size=4)
  rollout = generate_settings.OpdRollout(
      max_prompt_length=40, temperature=1.0, extra_stop_ids=extra_stop_ids
  )
  decode = rollout.denoise_config(tokenizer)
  return sources_lib.ConvertedSources(
      tokenizer=tokenizer,
      bd=bd,
      decode=decode,
      export=export_plan.ExportPlan("", None, chat.ChatOptions(), None),
  )


class ConvertedSourcesTest(absltest.TestCase):

  def test_fingerprint_fields_are_the_tokenizer_digest_bd_and_stop_ids(self):
    sources = _sources(extra_stop_ids=(7,))
    digest = fingerprint_lib.tokenizer_digest(sources.tokenizer)
    eos_id = sources.tokenizer.eos_token_id
    self.assertEqual(
        sources.fingerprint_fields(),
        {
            "tokenizer": digest,
            "bd": sources.bd.to_dict(),
            "stop_ids": [eos_id, 7],
        },
    )
    named = sources.fingerprint_fields("tokenizer.student")
    self.assertEqual(named["tokenizer.student"], digest)
    self.assertNotIn("tokenizer", named)

  def test_validate_for_model_checks_every_id_against_the_vocabulary(self):
    sources = _sources(extra_stop_ids=(7,))
    vocab = len(sources.tokenizer)
    sources.validate_for_model(test_common.tiny_qwen3_config(vocab))
    outside = _sources(extra_stop_ids=(vocab + 5,))
    with self.assertRaisesRegex(ValueError, "outside"):
      outside.validate_for_model(test_common.tiny_qwen3_config(vocab))
    too_small = test_common.tiny_qwen3_config(sources.bd.mask_token_id)
    with self.assertRaisesRegex(ValueError, "mask_token_id"):
      sources.validate_for_model(too_small)

  def test_encode_prompts_renders_with_the_trained_switches(self):
    sources = _sources()
    # A template that renders the thinking switch, so that it shows.
    sources.tokenizer.chat_template += (
        "{% if enable_thinking is false %}x{% endif %}"
    )
    export = dataclasses.replace(
        sources.export, chat_options=chat.ChatOptions(enable_thinking=False)
    )
    sources = dataclasses.replace(sources, export=export)
    _, held_out = dataset_lib.conversations(
        config_files.get_config("opd", "smoke").data
    )
    got = sources.encode_prompts(held_out, 32)
    want = prompts_lib.encode_prompts(
        sources.tokenizer, held_out, 32, sources.chat_options
    )
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_array_equal(got.lengths, want.lengths)
    self.assertEqual(got.answers, want.answers)
    default = prompts_lib.encode_prompts(sources.tokenizer, held_out, 32)
    self.assertFalse(np.array_equal(got.tokens, default.tokens))
    with self.assertRaisesRegex(ValueError, "max_prompt_length"):
      sources.encode_prompts(held_out, 2)

  def test_the_sources_are_frozen(self):
    with self.assertRaises(dataclasses.FrozenInstanceError):
      _sources().decode = None


class ReadConvertedTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.config = run_test_common.smoke_grpo_config(self.root)

  def test_the_sources_of_a_random_model(self):
    stage = run_test_common.converted_stage(self.config)
    sources = sources_lib.read_converted(
        stage, "checkpoint", stage.settings.rollout
    )
    eos_id = sources.tokenizer.eos_token_id
    self.assertEqual(sources.decode.stop_ids, (eos_id, 7))
    self.assertEqual(
        sources.decode, stage.settings.rollout.denoise_config(sources.tokenizer)
    )
    self.assertEqual(
        sources.bd.block_size, self.config.model.scratch_bd.block_size
    )
    # The export it plans: no HF files to keep, under the stage's workdir.
    self.assertIsNone(sources.export.source)
    self.assertEqual(sources.export.directory, stage.export_dir)
    self.assertEqual(sources.chat_options, stage.settings.data.chat_options)
    self.assertEqual(sources.export.chat_options, sources.chat_options)
    self.assertFalse(os.path.exists(self.config.workdir))

  def test_an_sdar_policy_stops_at_every_eos_its_generation_config_lists(
      self,
  ):
    # sdar_tiny's generation_config lists [2, 0]; 0 is its tokenizer's pad,
    # so the import gives it a pad of its own (bd_formats.PAD_TOKEN).
    self.config.model.update(
        random_init=False, reference="", checkpoint=test_common.SDAR_TINY
    )
    stage = run_test_common.converted_stage(self.config)
    sources = sources_lib.read_converted(
        stage, "checkpoint", stage.settings.rollout
    )
    self.assertEqual(sources.decode.stop_ids, (2, 0, 7))
    self.assertEqual(sources.decode.pad_id, 401)
    self.assertEqual(sources.fingerprint_fields()["stop_ids"], [2, 0, 7])

  def test_colliding_special_ids_fail_before_anything_is_written(self):
    stage = run_test_common.converted_stage(self.config)
    bd = sources_lib.read_converted(
        stage, "checkpoint", stage.settings.rollout
    ).bd
    self.config.rollout.extra_stop_ids = (bd.mask_token_id,)
    stage = run_test_common.converted_stage(self.config)
    with self.assertRaisesRegex(ValueError, r"mask_token_id=\d+ equals"):
      sources_lib.read_converted(stage, "checkpoint", stage.settings.rollout)
    self.assertFalse(os.path.exists(self.config.workdir))

  def test_a_rollout_past_max_position_embeddings_is_refused(self):
    # smoke: prompts of up to 32 tokens and an 8-token budget.
    self.config.model.update(
        random_init=False,
        reference="",
        checkpoint=test_common.sdar_tiny_with_positions(
            self.create_tempdir().full_path, 39
        ),
    )
    stage = run_test_common.converted_stage(self.config)
    with self.assertRaisesRegex(
        ValueError,
        r"^rollout\.max_prompt_length=32 plus rollout\.max_new_tokens=8 need"
        r" 40 positions, but model\.checkpoint's config\.json declares"
        r" max_position_embeddings=39",
    ):
      sources_lib.read_converted(stage, "checkpoint", stage.settings.rollout)
    self.assertFalse(os.path.exists(self.config.workdir))

  def test_an_export_the_model_cannot_fill_is_refused(self):
    self.config.export.format = "sdar"  # The random model is shifted.
    stage = run_test_common.converted_stage(self.config)
    with self.assertRaisesRegex(ValueError, r"^export\.format='sdar'"):
      sources_lib.read_converted(stage, "checkpoint", stage.settings.rollout)


class PlanExportTest(absltest.TestCase):
  """`plan_export` on an AR source: SFT's, whose tokenizer lacks the mask."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tokenizer = tokenizer_lib.build_char_tokenizer()
    cls.checkpoint = os.path.join(
        tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir()), "ar_export"
    )
    export.save_checkpoint(
        test_common.tiny_qwen3(vocab_size=len(cls.tokenizer), seed=2),
        cls.checkpoint,
        tokenizer=cls.tokenizer,
    )

  def _plan(self, **changes):
    config = config_files.get_config("sft", "tiny")
    config.workdir = os.path.join(self.create_tempdir().full_path, "run")
    config.model.checkpoint = self.checkpoint
    for key, value in changes.items():
      section, field = key.split("__")
      config[section][field] = value
    stage = stage_lib.Stage(
        config,
        run_test_common.spec(
            model=sections.SftModel,
            bd=sections.Bd,
            data=data_settings.SftData,
            export=sections.ExportSettings,
        ),
    )
    bd = stage.settings.bd
    return stage, sources_lib.plan_export(
        stage,
        "checkpoint",
        self.tokenizer,
        bd,
        chat_options=stage.settings.data.chat_options,
        mask_token=bd.mask_token,
    )

  def test_keeps_the_switches_and_the_files_read_once(self):
    stage, plan = self._plan()
    self.assertEqual(plan.chat_options, stage.settings.data.chat_options)
    self.assertEqual(
        plan.source.config, hf_checkpoint.read_config(self.checkpoint)
    )
    self.assertEqual(plan.directory, stage.export_dir)
    self.assertFalse(os.path.exists(stage.workdir))

  def test_a_format_the_model_cannot_take_is_refused_naming_the_key(self):
    with self.assertRaisesRegex(
        ValueError,
        r"^export\.format='sdar' \(SDAR\) holds same_position logits.*"
        r"bd\.alignment=same_position",
    ):
      self._plan(export__format="sdar")
    # SDAR takes a same-position Qwen3 and any mask token, even one the AR
    # tokenizer does not have yet.
    self._plan(
        export__format="sdar",
        bd__alignment="same_position",
        bd__mask_token="<|not_yet|>",
    )


class ExportPlanTest(absltest.TestCase):
  """A converted model's planned export, written after training."""

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.config = run_test_common.smoke_grpo_config(self.root)

  def _converted(self):
    stage = run_test_common.converted_stage(self.config)
    settings = stage.settings
    sources = sources_lib.read_converted(stage, "checkpoint", settings.rollout)
    model = models.load(
        settings.model,
        "checkpoint",
        mesh_lib.make_mesh(mesh_lib.MeshSettings()),
    )
    return stage, sources, model

  def test_a_full_disk_leaves_no_weights_without_their_settings(self):
    _, sources, model = self._converted()
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    # The disk fills as block_diffusion.json is written, after the weights.
    with mock.patch.object(bd_config.files, "write_text", side_effect=full):
      with self.assertRaisesRegex(
          ValueError,
          rf"^writing the export '{sources.export.directory}' failed: No"
          " space left on device; free space there, then a relaunch",
      ):
        sources.export.write(model, sources.tokenizer, sources.bd)
    self.assertEqual(os.listdir(self.config.workdir), [])

  def test_write_is_export_block_diffusion_of_the_plan(self):
    _, sources, model = self._converted()
    exported = sources.export.write(
        model, sources.tokenizer, sources.bd, stop_ids=(7,), extra={"a": 1}
    )
    self.assertEqual(exported, sources.export.directory)
    by_hand = os.path.join(self.root, "by_hand")
    bd_export.export_block_diffusion(
        model,
        sources.tokenizer,
        by_hand,
        bd=sources.bd,
        chat_options=sources.chat_options,
        source=None,
        stop_ids=(7,),
        extra={"a": 1},
    )
    names = sorted(os.listdir(exported))
    self.assertEqual(names, sorted(os.listdir(by_hand)))
    for name in names:
      with open(os.path.join(exported, name), "rb") as a:
        with open(os.path.join(by_hand, name), "rb") as b:
          self.assertEqual(a.read(), b.read(), name)


if __name__ == "__main__":
  absltest.main()
