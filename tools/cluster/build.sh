#!/usr/bin/env bash
# Builds the pinned cluster binaries from the Go module proxy into a cache keyed by the
# pinned versions, and prints the bin directory on stdout. A warm cache makes this a no-op.
#   build.sh [kwok|realnode|all]   (default: kwok)
#     kwok:      kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok, kwokctl, helm
#     realnode:  the control plane and helm, plus kubelet, kube-proxy, coredns, metrics-server, crisweep
# Concurrent builds wait for each other (flock on the cache directory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="/usr/local/go/bin:$PATH" GOFLAGS="-mod=mod -buildvcs=false" GONOSUMDB=k8s.io GOTOOLCHAIN=local
kube_version=$(awk '/^require k8s.io\/kubernetes/ {print $3}' "$here/kubernetes/go.mod")
key=$(cat "$here"/*/go.mod "$here"/*/go.sum "$here"/crisweep/*.go "$0" | sha256sum | cut -c1-12)
cache=${LOADSTAGE_CACHE:-$HOME/.cache/loadstage}
bin="$cache/cluster-bin/$kube_version-$key"

control_plane=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm)
case "${1:-kwok}" in
  kwok) want=("${control_plane[@]}" kwok kwokctl) ;;
  realnode) want=("${control_plane[@]}" kubelet kube-proxy coredns metrics-server crisweep) ;;
  all) want=("${control_plane[@]}" kwok kwokctl kubelet kube-proxy coredns metrics-server crisweep) ;;
  *) echo "usage: build.sh [kwok|realnode|all]" >&2; exit 2 ;;
esac

missing() { local b; for b in "${want[@]}"; do [ -x "$bin/$b" ] || echo "$b"; done; }
if [ -n "$(missing)" ]; then
  mkdir -p "$bin"
  exec 9>"$cache/cluster-bin/.build.lock"
  flock 9
  minor=${kube_version#v1.}; minor=${minor%%.*}
  kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  # build NAME MODULE_DIR PACKAGE [GO_BUILD_ARGS...]: into a temporary name, then renamed
  build() {
    local name=$1 dir=$2 package=$3; shift 3
    echo "build.sh: building $name" >&2
    (cd "$here/$dir" && go build -trimpath "$@" -o "$bin/.$name.tmp" "$package") >&2
    mv "$bin/.$name.tmp" "$bin/$name"
  }
  for b in $(missing); do
    case "$b" in
      kube*) build "$b" kubernetes "k8s.io/kubernetes/cmd/$b" -ldflags "$kube_ldflags" ;;
      etcd) build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w" ;;
      kwok|kwokctl) build "$b" kwok "sigs.k8s.io/kwok/cmd/$b" -ldflags "-s -w" ;;
      helm) build helm helm helm.sh/helm/v3/cmd/helm -ldflags "-s -w" ;;
      # static binaries: each runs alone in a FROM-scratch image on the real node
      coredns) CGO_ENABLED=0 build coredns coredns github.com/coredns/coredns -ldflags "-s -w" ;;
      metrics-server) CGO_ENABLED=0 build metrics-server metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server \
                        -ldflags "-s -w" ;;
      crisweep) CGO_ENABLED=0 build crisweep crisweep . -ldflags "-s -w" ;;
    esac
  done
fi
echo "$bin"
