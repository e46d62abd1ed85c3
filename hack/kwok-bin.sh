#!/usr/bin/env bash
# Builds the kwok controller (sigs.k8s.io/kwok/cmd/kwok), which plays the kubelet for the tests in
# test/kwok, from the Go module proxy (GitHub release downloads are not reachable here) into a
# version-keyed cache outside the checkout. A cached binary is reused: nothing is rebuilt when it
# exists.
#
# Unlike kube-apiserver and etcd (hack/envtest-bins.sh), sigs.k8s.io/kwok's go.mod carries no
# replace directives, so `go install pkg@version` accepts it and no wrapper module is needed; it
# builds with the dependency versions kwok pins, untouched by this repository's go.mod.
# Prints the binary path on its last line.
set -euo pipefail

KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarops/bin}
out="$CACHE_DIR/kwok-$KWOK_VERSION"

if [ -x "$out/kwok" ]; then
  echo "$out/kwok"
  exit 0
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "building kwok $KWOK_VERSION (a few minutes cold on 2 cores)" >&2
# GOBIN into a scratch dir, then an atomic rename: an interrupted build never leaves a binary the
# cache check above would take for a finished one. GOFLAGS from the caller (e.g. -mod=mod) would
# make `go install pkg@version` refuse, so it is cleared.
cd "$work"
GOFLAGS= GOBIN="$work/bin" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
mv "$work/bin/kwok" "$out/kwok.tmp"
mv "$out/kwok.tmp" "$out/kwok"
echo "$out/kwok"
