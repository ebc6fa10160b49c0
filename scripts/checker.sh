#!/usr/bin/env bash
# Runs the Jepsen-style checker (scripts/chaos/checker, docs/chaos.md):
# a real three-node cluster of this repo's muster binary, each node in its
# own network namespace, faults from a seeded schedule, and the history
# checked after each run. Needs root, iproute2 and nft (Debian: nftables).
#   scripts/checker.sh                        # seed 1, 5 faults
#   scripts/checker.sh -seed 7 -faults 6 -runs 3
set -euo pipefail
cd "$(dirname "$0")/.."
# Where it cannot run, it says so in one line and exits 0 (CI goes on).
if [ "$(id -u)" != 0 ]; then
  echo "== checker SKIPPED: it needs root (network namespaces, veth, nft)"
  exit 0
fi
if ! command -v nft >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "${MUSTER_NO_INSTALL:-}" != 1 ]; then
    echo "== checker: installing Debian's nftables (log: /tmp/muster-install-nftables.log)"
    install="apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends nftables"
    DEBIAN_FRONTEND=noninteractive $install >/tmp/muster-install-nftables.log 2>&1 ||
      { apt-get update >>/tmp/muster-install-nftables.log 2>&1 && DEBIAN_FRONTEND=noninteractive $install >>/tmp/muster-install-nftables.log 2>&1; } || true
  fi
  if ! command -v nft >/dev/null 2>&1; then
    echo "== checker SKIPPED: nft (Debian's nftables) is missing and could not be installed"
    exit 0
  fi
fi
if ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
  echo "== checker SKIPPED: ip netns (iproute2) does not work here"
  exit 0
fi
# The switches of the scripts are not settings of the nodes it starts
# (they read MUSTER_* from the environment and refuse unknown keys).
unset MUSTER_NO_INSTALL MUSTER_NO_INTEROP
bin="$(mktemp -d /tmp/mchk-bin.XXXXXX)"
cleanup() {
  # The checker removes what it made; this is the backstop for a kill.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^mchk-' || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del mchk-h 2>/dev/null || true
  rm -rf "$bin"
}
trap cleanup EXIT
go build -o "$bin/muster" ./cmd/muster
go build -o "$bin/checker" ./scripts/chaos/checker
"$bin/checker" -muster "$bin/muster" "$@"
