#!/usr/bin/env bash
# Brings up a real one-node Kubernetes cluster on this machine, as root: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd and runc, the kubelet, kube-proxy, CoreDNS
# and metrics-server. Every container runs a locally built image (images.sh); nothing is pulled.
# Idempotent: components that run already are kept. Prints the admin kubeconfig on stdout.
#   up.sh [--fresh]    --fresh first drops etcd data, the kubelet's directories and CNI IPAM
#
# Network: every server binds 127.0.0.1, except the kubelet API and the relay that lets pods reach
# the apiserver, which bind the node's bridge ($BRIDGE_IP). Pods live on that bridge. Blackhole
# routes for the pod and Service ranges, a guard first in FORWARD that drops anything to or from
# the uplink, no masquerading and a CoreDNS without upstream keep every packet on the machine.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root
BIN=$(bin_dir)
export PATH="$BIN:/usr/local/sbin:/usr/sbin:/sbin:$PATH"
for tool in containerd ctr runc socat iptables ip openssl curl /usr/lib/cni/bridge; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup --realnode"
done
mkdir -p "$NODE_STATE/pids" "$NODE_LOGS" "$NODE_RUN" "$NODE_LIB"
if [ "${1:-}" = --fresh ]; then
  [ -z "$(ls "$NODE_STATE/pids")" ] || die "the node is up; run down first"
  rm -rf "${NODE_STATE:?}/etcd" "${NODE_LIB:?}/kubelet" "${NODE_RUN:?}/cni-ipam"
fi

# start NAME COMMAND...: in its own session, logging to NAME.log; "PID EXECUTABLE" goes to pids/NAME
start() {
  local name=$1 pidfile=$NODE_STATE/pids/$1 pid exe; shift
  if [ -f "$pidfile" ]; then
    read -r pid exe < "$pidfile"
    if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then return; fi
  fi
  exe=$(readlink -f "$(command -v "$1")")
  setsid "$@" >>"$NODE_LOGS/$name.log" 2>&1 </dev/null &
  echo "$! $exe" > "$pidfile"
}

RENDERED=(NODE_LIB NODE_RUN NODE_PKI NODE_CONF NODE_NAME BRIDGE BRIDGE_IP POD_SUBNET POD_CIDR DNS_IP
          PAUSE_IMAGE COREDNS_IMAGE METRICS_SERVER_IMAGE)
# render TEMPLATE OUT: fills in ${NAME} for every NAME in RENDERED; replaces OUT only if it changed,
# by a rename (a running containerd watches net.d)
render() {
  local text name
  text=$(<"$1")
  for name in "${RENDERED[@]}"; do text=${text//"\${$name}"/"${!name}"}; done
  [[ $text != *'${'* ]] || die "a placeholder is left in $1"
  printf '%s\n' "$text" > "$2.tmp"
  if cmp -s "$2.tmp" "$2"; then rm -f "$2.tmp"; else mv -f "$2.tmp" "$2"; fi
}

# --- configuration and PKI -----------------------------------------------------------------------
mkdir -p "$NODE_CONF/net.d"
for f in containerd.toml kubelet.yaml kube-proxy.yaml coredns.yaml metrics-server.yaml; do
  render "$REALNODE_DIR/conf/$f.in" "$NODE_CONF/$f"
done
render "$REALNODE_DIR/conf/net.d/10-loadstage-node.conflist.in" "$NODE_CONF/net.d/10-loadstage-node.conflist"
for registry in _default docker.io registry.k8s.io quay.io ghcr.io gcr.io k8s.gcr.io localhost:5000 127.0.0.1:5000; do
  mkdir -p "$NODE_CONF/registries/$registry"
  printf 'server = "http://127.0.0.1:5000"\n[host."http://127.0.0.1:5000"]\n  capabilities = ["pull", "resolve"]\n' \
    > "$NODE_CONF/registries/$registry/hosts.toml"
done
bash "$REALNODE_DIR/pki.sh"
for name in UPLINK BRIDGE BRIDGE_IP POD_CIDR SVC_CIDR GUARD_CHAIN; do printf '%s=%q\n' "$name" "${!name}"; done \
  > "$NODE_STATE/node.env"

# --- network guard ---------------------------------------------------------------------------------
ip route replace blackhole "$SVC_CIDR"
ip route replace blackhole "$POD_CIDR"
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/${POD_SUBNET#*/}" dev "$BRIDGE"
fi
ip link set "$BRIDGE" up
# The guard lives in the mangle table: every packet meets it before the filter table, where
# kube-proxy and the kubelet insert their own rules (some ACCEPT) at the top of FORWARD and INPUT.
for iptables in iptables ip6tables; do
  $iptables -t mangle -N "$GUARD_CHAIN" 2>/dev/null || $iptables -t mangle -F "$GUARD_CHAIN"
  $iptables -t mangle -A "$GUARD_CHAIN" -o "$UPLINK" -j DROP
  $iptables -t mangle -A "$GUARD_CHAIN" -i "$UPLINK" -j DROP
  $iptables -t mangle -C FORWARD -j "$GUARD_CHAIN" 2>/dev/null || $iptables -t mangle -I FORWARD 1 -j "$GUARD_CHAIN"
done
iptables -t mangle -C INPUT -i "$UPLINK" -d "$BRIDGE_IP" -j DROP 2>/dev/null ||
  iptables -t mangle -I INPUT 1 -i "$UPLINK" -d "$BRIDGE_IP" -j DROP
[ -f "$NODE_STATE/ip_forward.before" ] || cat /proc/sys/net/ipv4/ip_forward > "$NODE_STATE/ip_forward.before"
[ -d /proc/sys/net/bridge ] || modprobe br_netfilter
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
say "network guard: blackholes $SVC_CIDR $POD_CIDR, nothing forwarded to or from $UPLINK"

# --- control plane ---------------------------------------------------------------------------------
P=$NODE_PKI
start etcd etcd --name loadstage-node --data-dir "$NODE_STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "loadstage-node=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls '' \
  --quota-backend-bytes 2147483648
start containerd containerd --config "$NODE_CONF/containerd.toml"
wait_until etcd 60 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
start kube-apiserver kube-apiserver \
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address=127.0.0.1 --secure-port="$API_PORT" --advertise-address="$BRIDGE_IP" \
  --service-cluster-ip-range="$SVC_CIDR" --allow-privileged=true \
  --client-ca-file="$P/ca.crt" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --requestheader-client-ca-file="$P/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$P/front-proxy-client.crt" --proxy-client-key-file="$P/front-proxy-client.key" \
  --enable-aggregator-routing=true \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement \
  --profiling=false --event-ttl=2h
wait_until kube-apiserver 120 curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" \
  "https://127.0.0.1:$API_PORT/readyz"
say "kube-apiserver ready"
# pods reach the apiserver through the `kubernetes` Service, whose endpoint is this relay
start api-relay socat "TCP-LISTEN:$API_PORT,bind=$BRIDGE_IP,reuseaddr,fork" "TCP:127.0.0.1:$API_PORT"
start kube-controller-manager kube-controller-manager --kubeconfig="$P/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$P/controller-manager.kubeconfig" --authorization-kubeconfig="$P/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
  --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
  --root-ca-file="$P/ca.crt" --service-account-private-key-file="$P/sa.key" \
  --use-service-account-credentials=true --allocate-node-cidrs=false \
  --service-cluster-ip-range="$SVC_CIDR" --profiling=false
start kube-scheduler kube-scheduler --kubeconfig="$P/scheduler.kubeconfig" \
  --authentication-kubeconfig="$P/scheduler.kubeconfig" --authorization-kubeconfig="$P/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false --profiling=false

# --- the node --------------------------------------------------------------------------------------
wait_until containerd 60 ctr --address "$NODE_SOCKET" version
import_images
start kubelet kubelet --config="$NODE_CONF/kubelet.yaml" --kubeconfig="$P/kubelet.kubeconfig" \
  --hostname-override="$NODE_NAME" --node-ip="$BRIDGE_IP" --root-dir="$NODE_LIB/kubelet" \
  --oom-score-adj=0 --v=1
start kube-proxy kube-proxy --config="$NODE_CONF/kube-proxy.yaml" --v=1

kubectl() { command kubectl --kubeconfig "$NODE_KUBECONFIG" "$@"; }
node_ready() {
  [ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_until "node $NODE_NAME Ready" 120 node_ready
say "node Ready"
# The pods' CPU before the host's other processes (a test run's other tiers, beside the node), as on a node of
# their own: the kubelet gives the kubepods cgroup its allocatable cores' weight (1024 a core in cgroup v1), the
# same as one busy host process a core; 16 times that. Their limits still cap each pod.
pods_first() {
  if [ -f /sys/fs/cgroup/cpu/kubepods/cpu.shares ]; then
    echo $(( $(nproc) * 1024 * 16 )) > /sys/fs/cgroup/cpu/kubepods/cpu.shares
  elif [ -f /sys/fs/cgroup/kubepods/cpu.weight ]; then
    echo 10000 > /sys/fs/cgroup/kubepods/cpu.weight
  else
    return 1
  fi
}
wait_until "the kubepods cgroup" 60 pods_first
say "pods' CPU weight: $(cat /sys/fs/cgroup/cpu/kubepods/cpu.shares /sys/fs/cgroup/kubepods/cpu.weight 2>/dev/null)"
kubectl apply -f "$NODE_CONF/coredns.yaml" -f "$NODE_CONF/metrics-server.yaml" >/dev/null
wait_until CoreDNS 180 kubectl -n kube-system rollout status deployment/coredns --timeout=2s
wait_until metrics-server 180 kubectl -n kube-system rollout status deployment/metrics-server --timeout=2s
wait_until "metrics.k8s.io" 120 kubectl wait apiservice/v1beta1.metrics.k8s.io --for=condition=Available --timeout=2s
wait_until "default ServiceAccount" 60 kubectl get serviceaccount default
say "up: export KUBECONFIG=$NODE_KUBECONFIG"
echo "$NODE_KUBECONFIG"
