#!/usr/bin/env bash
# Runs a tunix_bd recipe on the local GPUs (install with `pip install '.[gpu]'`).
#
#   launchers/gpu.sh CONFIG[:ARG] [--config.KEY=VALUE ...]
#
# All visible GPUs form the mesh (mesh.fsdp=-1 by default); restrict them with
# CUDA_VISIBLE_DEVICES.
set -euo pipefail
export JAX_PLATFORMS=cuda
# Let XLA grow its pool instead of reserving 75% of the memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
exec tunix run --plugin tunix_bd "$@"
