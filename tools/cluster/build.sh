#!/usr/bin/env bash
# Builds the pinned control-plane binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok, kwokctl, helm) from the Go module proxy into a cache
# keyed by the pinned versions. A warm cache makes this a no-op.
# Prints the bin directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="/usr/local/go/bin:$PATH" GOFLAGS=-mod=mod GONOSUMDB=k8s.io GOTOOLCHAIN=local
kube_version=$(awk '/^require k8s.io\/kubernetes/ {print $3}' "$here/kubernetes/go.mod")
key=$(cat "$here"/*/go.mod "$here"/*/go.sum "$0" | sha256sum | cut -c1-12)
bin="${LOADSTAGE_CACHE:-$HOME/.cache/loadstage}/cluster-bin/$kube_version-$key"
want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl helm)
missing=0
for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing=1; done
if [ "$missing" = 1 ]; then
  mkdir -p "$bin.tmp"
  minor=${kube_version#v1.}; minor=${minor%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  build() { local dir=$1; shift; (cd "$here/$dir" && go build -trimpath "$@") >&2; }
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$bin.tmp/$c" ] || build kubernetes -ldflags "$ldflags" -o "$bin.tmp/$c" "k8s.io/kubernetes/cmd/$c"
  done
  [ -x "$bin.tmp/etcd" ] || build etcd -ldflags "-s -w" -o "$bin.tmp/etcd" go.etcd.io/etcd/server/v3
  for c in kwok kwokctl; do
    [ -x "$bin.tmp/$c" ] || build kwok -ldflags "-s -w" -o "$bin.tmp/$c" "sigs.k8s.io/kwok/cmd/$c"
  done
  [ -x "$bin.tmp/helm" ] || build helm -ldflags "-s -w" -o "$bin.tmp/helm" helm.sh/helm/v3/cmd/helm
  rm -rf "$bin" && mv "$bin.tmp" "$bin"
fi
echo "$bin"
