#!/usr/bin/env bash
# Runs a tunix_bd recipe on this machine's CPU.
#
#   launchers/local_cpu.sh CONFIG[:ARG] [--config.KEY=VALUE ...]
#
# TUNIX_BD_CPU_DEVICES=N splits the CPU into N XLA devices, to try a
# multi-device mesh (e.g. --config.mesh.fsdp=2 --config.mesh.tp=2) locally.
set -euo pipefail
export JAX_PLATFORMS=cpu
if [[ -n "${TUNIX_BD_CPU_DEVICES:-}" ]]; then
  export XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=${TUNIX_BD_CPU_DEVICES}"
fi
exec tunix run --plugin tunix_bd "$@"
