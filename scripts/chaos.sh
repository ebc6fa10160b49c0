#!/usr/bin/env bash
# Builds the image and runs the chaos scenarios against a three-zone
# docker-compose cluster (see README, "Chaos testing").
#   scripts/chaos.sh                      # all scenarios
#   scripts/chaos.sh -scenario partition  # one (partition, crash, rolling, deaths, failover, fullrestart)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
  echo "chaos: no Docker engine answers (docker info failed); nothing run" >&2
  exit 2
fi
scripts/build-image.sh
exec go run ./scripts/chaos "$@"
