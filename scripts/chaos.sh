#!/usr/bin/env bash
# Builds the image and runs the chaos scenarios against a three-zone
# docker-compose cluster (see README, "Chaos testing").
#   scripts/chaos.sh                      # all scenarios
#   scripts/chaos.sh -scenario partition  # one (partition, crash, rolling, deaths, failover, fullrestart, converge, watch)
#   MUSTER_IMAGE=muster:mine scripts/chaos.sh   # another image tag (the compose files read it)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
  echo "chaos: no Docker engine answers (docker info failed); nothing run" >&2
  exit 2
fi
export MUSTER_IMAGE="${MUSTER_IMAGE:-muster:latest}"
scripts/build-image.sh "$MUSTER_IMAGE"
exec go run ./scripts/chaos "$@"
