#!/usr/bin/env bash
# The test command of the README: formatting, vet, and every test with the
# race detector, including the nested module of deploy/kubernetes. Tools
# some tests use (promtool for the alert rules, kubectl for the
# kustomization) are installed from Debian's packages when missing and this
# runs as root with apt-get; otherwise those tests skip and say so.
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

# The real Java Eureka client and server (interop/javaeureka) need Debian's
# Java 17 runtime and libraries; their install script beside the repository
# puts them in place (about 20 minutes on a machine without them).
java_eureka=../shared/java-eureka
# --jdk adds javac: the tests compile their own Java client (interop/javaeureka/testdata/agent).
if [ -x "$java_eureka/install.sh" ] && { ! "$java_eureka/classpath.sh" >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ] && [ "${MUSTER_NO_INSTALL:-}" != 1 ]; then
    echo "== installing the Java Eureka runtime ($java_eureka/install.sh --jdk)"
    timeout 2400 "$java_eureka/install.sh" --jdk >/tmp/muster-install-java-eureka.log 2>&1 ||
      echo "== could not install it (see /tmp/muster-install-java-eureka.log): the Java interop tests will skip"
  else
    echo "== the Java Eureka runtime is not installed (run $java_eureka/install.sh as root): the Java interop tests will skip"
  fi
fi

go vet ./...
go test -race -count=1 ./...
# deploy/kubernetes is a module of its own (the Kubernetes and kustomize
# libraries stay out of the server's go.mod).
(cd deploy/kubernetes && go vet ./... && go test -race -count=1 ./...)
