#!/usr/bin/env bash
# The test command of the README: formatting, vet, and every test with the
# race detector, including the nested module of deploy/kubernetes. Tools
# some tests use (promtool for the alert rules, kubectl for the
# kustomization, a JDK and Maven for the interop apps, …) are installed from
# Debian's packages when missing and this runs as root with apt-get;
# otherwise those tests skip and say so. MUSTER_NO_INSTALL=1 installs
# nothing; MUSTER_NO_INTEROP=1 skips the interop prebuild. The list and what
# uses each: docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# ensure_tool COMMAND PACKAGE: install PACKAGE when COMMAND is missing. No
# service may start: Debian's prometheus package would start a server, so a
# policy-rc.d that forbids starts is put in place for the install unless one
# exists already (containers usually have one).
ensure_tool() {
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || [ "${MUSTER_NO_INSTALL:-}" = 1 ]; then
    echo "== $cmd not installed (Debian package $pkg): the tests that need it will skip"
    return 0
  fi
  echo "== installing $pkg for $cmd"
  local policy=/usr/sbin/policy-rc.d made_policy=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  fi
  local install="apt-get install -y --no-install-recommends $pkg"
  DEBIAN_FRONTEND=noninteractive timeout 600 $install >/tmp/muster-install-$pkg.log 2>&1 ||
    { timeout 300 apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive timeout 600 $install >/tmp/muster-install-$pkg.log 2>&1; } ||
    echo "== could not install $pkg (see /tmp/muster-install-$pkg.log): the tests that need $cmd will skip"
  if [ -n "$made_policy" ]; then rm -f "$policy"; fi
}
ensure_tool promtool prometheus
ensure_tool dig bind9-dnsutils
# The DNS interface's HAProxy test (cmd/muster/dns_haproxy_test.go) runs a real haproxy.
ensure_tool haproxy haproxy
ensure_tool kubectl kubernetes-client
# The console's browser test (httpapi/browser_test.go) drives headless Chromium.
ensure_tool chromium chromium
# Keystore tests (tlsconfig, cmd/muster) make PKCS12 and JKS stores with the
# JDK's keytool (committed ones are tested without it) and one with openssl.
ensure_tool keytool openjdk-17-jre-headless
ensure_tool openssl openssl

# The interop tests run real clients and servers as their users get them:
# Spring Boot apps and the Spring Cloud Eureka Server from Maven Central,
# eureka-js-client from npm, py-eureka-client from PyPI. Their toolchains
# come from Debian's packages when missing; the builds go to a cache outside
# the repository (interop/interoptest: ~/.cache/muster-interop), done here
# once so a new machine's downloads are not charged to a test's timeout.
# Where a toolchain or a registry cannot be had, the prebuild says so and
# those tests skip with one line each.
ensure_tool javac openjdk-17-jdk-headless
ensure_tool mvn maven
ensure_tool node nodejs
ensure_tool npm npm
ensure_tool python3 python3
# py-eureka-client is built in a venv, whose pip bootstrap Debian ships apart.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  ensure_tool muster-python3-venv python3-venv
fi
if [ "${MUSTER_NO_INTEROP:-}" = 1 ]; then
  echo "== MUSTER_NO_INTEROP=1: the interop builds are not prepared (their tests skip or build on demand)"
else
  go run ./interop/interoptest/prebuild
fi

# This script's own switches are not settings: a node started by a test
# reads MUSTER_* from the environment as configuration and refuses unknown
# keys of its namespace.
unset MUSTER_NO_INSTALL MUSTER_NO_INTEROP

go vet ./...
go test -race -count=1 -timeout 25m ./...
# deploy/kubernetes is a module of its own (the Kubernetes and kustomize
# libraries stay out of the server's go.mod).
(cd deploy/kubernetes && go vet ./... && go test -race -count=1 ./...)
