# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A GRPO-like stage over a converted model, for the run package's tests."""

import dataclasses
import os
import subprocess
import sys

from tunix_bd import config_files
from tunix_bd.data import settings as data_settings
from tunix_bd.generate import settings as generate_settings
from tunix_bd.models import sections
from tunix_bd.run import stage as stage_lib


def smoke_grpo_config(root: str):
  """`grpo.py:smoke` (a random policy) writing under `root`, stop id 7 too."""
  config = config_files.get_config("grpo", "smoke")
  config.workdir = os.path.join(root, "run")
  config.rollout.extra_stop_ids = (7,)
  return config


def spec(**sections_):
  """A config class of typed sections `name=type`, as a recipe declares."""
  return dataclasses.make_dataclass(
      "Spec", list(sections_.items()), frozen=True
  )


def converted_stage(config) -> stage_lib.Stage:
  """The sections `sources.read_converted` reads, of a GRPO config."""
  return stage_lib.Stage(
      config,
      spec(
          model=sections.GrpoModel,
          data=data_settings.RlData,
          rollout=generate_settings.GrpoRollout,
          export=sections.ExportSettings,
      ),
  )


def hold_workdir(workdir: str) -> subprocess.Popen:
  """Another process holding `workdir`'s lock until its stdin is closed."""
  holder = subprocess.Popen(
      [
          sys.executable,
          "-c",
          (
              "import sys; from tunix_bd.run import workdir;"
              " held = workdir.lock(sys.argv[1]); print('held', flush=True);"
              " sys.stdin.read()"
          ),
          workdir,
      ],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
  )
  if holder.stdout.readline().strip() != "held":
    holder.kill()
    raise RuntimeError(f"the holder of {workdir} did not start.")
  return holder
