# Shared settings and helpers of the real-node scripts (sourced, not executed).
# Every setting may be overridden from the environment; use the same environment for every step.
# shellcheck shell=bash disable=SC2034

REALNODE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_ROOT=$(cd "$REALNODE_DIR/../../.." && pwd)
LOADSTAGE_CACHE=${LOADSTAGE_CACHE:-$HOME/.cache/loadstage}

# where things live
NODE_HOME=${NODE_HOME:-$LOADSTAGE_CACHE/realnode}     # images/ rootfs/ state/ logs/
NODE_STATE=$NODE_HOME/state                           # pki/ etcd/ pids/ conf/ node.env
NODE_LOGS=$NODE_HOME/logs                             # one log per component
NODE_IMAGES=$NODE_HOME/images                         # NAME.tar (docker-archive) + NAME.ref
NODE_RUN=${NODE_RUN:-/run/loadstage-node}             # containerd state and socket, CNI IPAM
NODE_LIB=${NODE_LIB:-/var/lib/loadstage-node}         # containerd root, kubelet root, pod logs
NODE_PKI=$NODE_STATE/pki
NODE_CONF=$NODE_STATE/conf
NODE_KUBECONFIG=$NODE_PKI/admin.kubeconfig
NODE_SOCKET=$NODE_RUN/containerd/containerd.sock

# the node and its network; change them together
NODE_NAME=${NODE_NAME:-loadstage-node}
BRIDGE=${BRIDGE:-lsnode0}
BRIDGE_IP=${BRIDGE_IP:-10.244.0.1}        # pods' gateway; the kubelet API and the API relay bind here
POD_SUBNET=${POD_SUBNET:-10.244.0.0/24}   # the bridge's range (host-local IPAM)
POD_CIDR=${POD_CIDR:-10.244.0.0/16}       # blackholed; the bridge's /24 is more specific
SVC_CIDR=${SVC_CIDR:-10.96.0.0/12}        # blackholed: only pods reach ClusterIPs
SVC_IP=${SVC_IP:-10.96.0.1}               # the `kubernetes` Service
DNS_IP=${DNS_IP:-10.96.0.10}              # CoreDNS
GUARD_CHAIN=LOADSTAGE-NODE-GUARD
UPLINK=${UPLINK:-$(ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')}
UPLINK=${UPLINK:-eth0}

# ports; all on 127.0.0.1 except the kubelet API and the API relay (on BRIDGE_IP).
# Not the defaults, so that kwok clusters on the same machine never clash.
API_PORT=${API_PORT:-16443}
ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
KCM_PORT=${KCM_PORT:-20257}
SCHEDULER_PORT=${SCHEDULER_PORT:-20259}

# image references: nothing is ever pulled; every reference names a locally built image
IMAGE_PREFIX=localhost:5000
PAUSE_IMAGE=$IMAGE_PREFIX/loadstage-node/pause:3.10
COREDNS_IMAGE=$IMAGE_PREFIX/loadstage-node/coredns:1.11.3
METRICS_SERVER_IMAGE=$IMAGE_PREFIX/loadstage-node/metrics-server:0.7.2
PYTHON_BASE_IMAGE=$IMAGE_PREFIX/loadstage-node/python:3.11-bookworm
REDIS_IMAGE=$IMAGE_PREFIX/loadstage-node/redis:7.0-bookworm
POSTGRES_IMAGE=$IMAGE_PREFIX/loadstage-node/postgres:15-bookworm
POSTGRES_UID=999   # the image's postgres user, made before the package (numeric, for runAsNonRoot)
PROJECT_TAG=${PROJECT_TAG:-$(awk '/^appVersion:/ {gsub(/"/, "", $2); print $2}' "$PROJECT_ROOT/charts/loadstage/Chart.yaml")}
PROJECT_TARGETS="operator runner-app injector example-app"
project_image() { echo "$IMAGE_PREFIX/loadstage/$1:$PROJECT_TAG"; }

bin_dir() { bash "$PROJECT_ROOT/tools/cluster/build.sh" realnode; }

say() { printf '[realnode %5ss] %s\n' "$SECONDS" "$*" >&2; }
die() { echo "realnode: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it creates a bridge, iptables rules, mounts and containers)"; }

# wait_until DESCRIPTION SECONDS COMMAND...: a wall-clock deadline, 0.2 s between tries
wait_until() {
  local what=$1 end=$(( SECONDS + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || die "timed out waiting for $what (logs: $NODE_LOGS)"
    sleep 0.2
  done
}

ctr_k8s() { ctr --address "$NODE_SOCKET" --namespace k8s.io "$@"; }

# Imports every image tarball that containerd lacks or that changed since its last import.
import_images() {
  local tar ref stamp have
  have=$(ctr_k8s images list --quiet 2>/dev/null || true)
  mkdir -p "$NODE_LIB/imported"
  for tar in "$NODE_IMAGES"/*.tar; do
    [ -e "$tar" ] || continue
    ref=$(cat "${tar%.tar}.ref")
    stamp=$NODE_LIB/imported/$(basename "$tar")
    if ! grep -qxF "$ref" <<<"$have" || [ ! -e "$stamp" ] || [ "$tar" -nt "$stamp" ]; then
      ctr_k8s images import --no-unpack=false "$tar" >/dev/null
      touch "$stamp"
      say "imported $ref"
    fi
  done
}
