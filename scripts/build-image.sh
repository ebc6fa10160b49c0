#!/usr/bin/env bash
# Builds the muster binary and the simulated clients (tools/clients, as
# muster-clients), static with CGO_ENABLED=0, and the muster:latest image
# FROM scratch around them, in one command.
#   scripts/build-image.sh [tag]
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-muster:latest}"
version="$(git describe --always --dirty 2>/dev/null || echo dev)"
mkdir -p build/image
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/muster-registry/muster/node.Version=${version}" -o build/image/muster ./cmd/muster
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o build/image/muster-clients ./tools/clients
docker build --quiet -t "$tag" -f Dockerfile build/image >/dev/null
echo "built image $tag (muster ${version}, $(du -h build/image/muster | cut -f1) binary)"
