# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Tests for tunix_bd.models.converted: the one opener of a converted model."""

from absl.testing import absltest
from flax import nnx
import jax
from tunix_bd import fingerprint as fingerprint_lib
from tunix_bd.generate import text
from tunix_bd.models import converted
from tunix_bd.models import precision as precision_lib
from tunix_bd.run import sources as sources_lib
from tunix_bd_tests import test_common
from tunix_bd_tests.run import run_test_common


def _dtypes(model):
  """`{ndim >= 2, ndim < 2}` -> the set of parameter dtypes of each."""
  leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
  return {
      matrix: {str(x.dtype) for x in leaves if (x.ndim >= 2) == matrix}
      for matrix in (True, False)
  }


class OpenConvertedTest(absltest.TestCase):

  def test_opens_without_loading_and_loads_at_the_precision_asked(self):
    opened = converted.open_converted(test_common.SDAR_TINY)
    self.assertIsNone(opened.model)
    self.assertEqual(opened.path, test_common.SDAR_TINY)
    bf16 = opened.load(precision=precision_lib.Precision(dtype="bfloat16"))
    # Decoding only: matrices in the compute dtype, norm scales float32.
    self.assertEqual(
        _dtypes(bf16.model), {True: {"bfloat16"}, False: {"float32"}}
    )
    self.assertEqual(
        (bf16.tokenizer, bf16.bd, bf16.chat_options),
        (opened.tokenizer, opened.bd, opened.chat_options),
    )
    # The Python API's loader is the same opener, at float32.
    loaded = text.load_model(test_common.SDAR_TINY)
    self.assertEqual(_dtypes(loaded.model)[True], {"float32"})
    self.assertEqual(loaded.bd, opened.bd)

  def test_a_training_recipe_reads_what_generation_opens(self):
    config = run_test_common.smoke_grpo_config(self.create_tempdir().full_path)
    config.model.update(
        random_init=False, reference="", checkpoint=test_common.SDAR_TINY
    )
    stage = run_test_common.converted_stage(config)
    sources = sources_lib.read_converted(
        stage, "checkpoint", stage.settings.rollout
    )
    opened = converted.open_converted(
        test_common.SDAR_TINY, key="model.checkpoint"
    )
    self.assertEqual(sources.bd, opened.bd)
    self.assertEqual(sources.chat_options, opened.chat_options)
    self.assertEqual(
        fingerprint_lib.tokenizer_digest(sources.tokenizer),
        fingerprint_lib.tokenizer_digest(opened.tokenizer),
    )


if __name__ == "__main__":
  absltest.main()
