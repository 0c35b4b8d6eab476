#!/usr/bin/env bash
# Runs a tunix_bd recipe as the single controller of a Pathways job.
#
#   launchers/pathways.sh CONFIG[:ARG] --config.workdir=gs://BUCKET/RUN \
#       [--config.KEY=VALUE ...] [--dry_run]
#
# Install the extra first: pip install '.[pathways]' (pathwaysutils). The
# Pathways cluster (proxy and resource manager) comes from GKE/xpk; this is
# the user job's side. Everything runs in one process that sees every device
# of the job (jax.process_count() == 1), so role meshes split them by config:
# --config.mesh.rollout.devices=N (or a fraction, or .slices=N).
#
# Use a gs:// workdir: the Pathways workers write the Orbax checkpoints there
# themselves (ENABLE_PATHWAYS_PERSISTENCE=1), and tunix_bd writes its
# fingerprint, metrics, reports and exports there through etils.epath.
#
# Environment (each may be preset; the defaults are shown):
#   JAX_BACKEND_TARGET=grpc://127.0.0.1:29000   the Pathways proxy
#   ENABLE_PATHWAYS_PERSISTENCE=1               workers write checkpoints
# JAX_PLATFORMS is always proxy. `tunix` then calls pathwaysutils.initialize()
# once, before the recipe imports JAX.
#
# --dry_run prints the environment set here and the resolved config, and
# connects to nothing.
set -euo pipefail
export JAX_PLATFORMS=proxy
export JAX_BACKEND_TARGET="${JAX_BACKEND_TARGET:-grpc://127.0.0.1:29000}"
export ENABLE_PATHWAYS_PERSISTENCE="${ENABLE_PATHWAYS_PERSISTENCE:-1}"
for arg in "$@"; do
  if [[ "${arg}" == "--dry_run" ]]; then
    echo "environment:"
    for name in JAX_PLATFORMS JAX_BACKEND_TARGET ENABLE_PATHWAYS_PERSISTENCE; do
      echo "  ${name}=${!name}"
    done
  fi
done
exec tunix run --plugin tunix_bd "$@"
