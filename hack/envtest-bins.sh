#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd that envtest runs, from the Go module proxy (GitHub release
# downloads are not reachable here), into a version-keyed cache outside the checkout. A cached build
# is reused: nothing is rebuilt when both binaries of the pinned versions exist.
#
# Both upstream modules carry replace directives, so `go install pkg@version` refuses them; a
# throw-away wrapper module requires them and repeats their replace lines with proxy versions.
# Prints the directory to use as KUBEBUILDER_ASSETS on its last line.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.5.21}
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sidecarops/bin}
out="$CACHE_DIR/envtest-kube-$K8S_VERSION-etcd-$ETCD_VERSION"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod

if [ ! -x "$out/etcd" ]; then
  echo "building etcd $ETCD_VERSION (a few minutes cold)" >&2
  e=${ETCD_VERSION#v3.}        # 5.21
  mkdir -p "$work/etcd" && cd "$work/etcd"
  cat > go.mod <<MOD
module sidecarops.local/etcdwrapper

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v2 => go.etcd.io/etcd/client/v2 v2.30$e
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/raft/v3 => go.etcd.io/etcd/raft/v3 $ETCD_VERSION
)
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy >&2
  go build -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
  mv "$out/etcd.tmp" "$out/etcd"
fi

if [ ! -x "$out/kube-apiserver" ]; then
  echo "building kube-apiserver $K8S_VERSION (10-20 minutes cold on 2 cores)" >&2
  staging=v0.${K8S_VERSION#v1.}   # v0.37.2
  mkdir -p "$work/kas" && cd "$work/kas"
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  {
    echo "module sidecarops.local/kubeapiserverwrapper"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' > tools.go
  go mod tidy >&2
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  go build -ldflags "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi
echo "$out"
