#!/usr/bin/env bash
# Stops the real node and undoes every change up.sh made to the host: processes (by the PIDs
# up.sh recorded, never by name), pod sandboxes (through the CRI, so that CNI releases veths and
# addresses), containers, mounts, network namespaces, kube-proxy's and the kubelet's iptables
# chains, the guard, the bridge, the blackhole routes, net.ipv4.ip_forward and the kubelet's
# cgroups. Keeps the binaries, the images, the PKI and etcd's data for a warm restart.
#   down.sh [--purge]    --purge also drops etcd's data and the kubelet's directories
set -uo pipefail
source "$(dirname "$0")/lib.sh"
need_root
# the values the node was started with win over the defaults
# shellcheck disable=SC1091
[ -f "$NODE_STATE/node.env" ] && source "$NODE_STATE/node.env"
BIN=$(bin_dir)
export PATH="$BIN:/usr/local/sbin:/usr/sbin:/sbin:$PATH"

# stop NAME [SECONDS]: SIGTERM to the recorded PID if it still runs the recorded executable,
# then SIGKILL after SECONDS
stop() {
  local name=$1 grace=${2:-20} pidfile=$NODE_STATE/pids/$1 pid exe
  [ -f "$pidfile" ] || return 0
  read -r pid exe < "$pidfile"
  if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then
    kill -TERM "$pid"
    for _ in $(seq $(( grace * 5 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then say "$name did not stop in ${grace}s: SIGKILL"; kill -KILL "$pid"; fi
  fi
  rm -f "$pidfile"
}

# the control loops first, so that nothing starts pods again
stop kube-controller-manager
stop kube-scheduler
stop kubelet 30
if [ -S "$NODE_SOCKET" ]; then
  crisweep "unix://$NODE_SOCKET" >&2
  for task in $(ctr_k8s tasks list --quiet 2>/dev/null); do ctr_k8s tasks kill --signal SIGKILL "$task" 2>/dev/null; done
  sleep 0.5
  for task in $(ctr_k8s tasks list --quiet 2>/dev/null); do ctr_k8s tasks delete --force "$task" >/dev/null 2>&1; done
  for c in $(ctr_k8s containers list --quiet 2>/dev/null); do ctr_k8s containers delete "$c" >/dev/null 2>&1; done
fi
stop kube-proxy
kube-proxy --cleanup >/dev/null 2>&1
# what kube-proxy --cleanup leaves: the kubelet's chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...)
for iptables in iptables ip6tables; do
  for table in filter nat mangle; do
    $iptables -t $table -S 2>/dev/null | grep -E '^-A .* -j KUBE-' | grep -vE '^-A KUBE-' | cut -c4- |
      while read -r rule; do eval "$iptables -t $table -D $rule" 2>/dev/null; done
    for chain in $($iptables -t $table -S 2>/dev/null | awk '/^-N KUBE-/ {print $2}'); do $iptables -t $table -F "$chain"; done
    for chain in $($iptables -t $table -S 2>/dev/null | awk '/^-N KUBE-/ {print $2}'); do $iptables -t $table -X "$chain"; done
  done
done
stop containerd 30
# shims outlive containerd; ours are the ones whose -address is our socket
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $NODE_SOCKET( |\$)"); do kill -KILL "$pid"; done
stop api-relay
stop kube-apiserver 10   # its graceful shutdown can hang; it holds no state
stop etcd 30

# mounts under our directories (rootfs overlays, shm, volumes), deepest first
findmnt -rn -o TARGET | awk -v run="$NODE_RUN/" -v lib="$NODE_LIB/" 'index($0, run) == 1 || index($0, lib) == 1' |
  sort -r | while read -r target; do umount -l "$target"; done
# network namespaces the CRI left: only those whose veth peer hangs on our bridge are ours
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do
  peer=$(ip -n "$ns" -o link show 2>/dev/null | sed -n 's/^[0-9]*: [^@:]*@if\([0-9]*\):.*/\1/p' | head -n 1)
  if [ -n "$peer" ] && ip -o link show 2>/dev/null | grep -q "^$peer: .* master $BRIDGE "; then ip netns delete "$ns"; fi
done
rm -rf "${NODE_RUN:?}/cni-ipam"
# the kubelet's cgroups, once empty (rmdir refuses a cgroup that still has processes)
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# the log links the kubelet keeps in /var/log/containers, for our pods only
find /var/log/containers -maxdepth 1 -type l -lname "$NODE_LIB/*" -delete 2>/dev/null

for iptables in iptables ip6tables; do
  $iptables -t mangle -D FORWARD -j "$GUARD_CHAIN" 2>/dev/null
  $iptables -t mangle -F "$GUARD_CHAIN" 2>/dev/null
  $iptables -t mangle -X "$GUARD_CHAIN" 2>/dev/null
done
iptables -t mangle -D INPUT -i "$UPLINK" -d "$BRIDGE_IP" -j DROP 2>/dev/null
ip link delete "$BRIDGE" 2>/dev/null
ip route delete blackhole "$SVC_CIDR" 2>/dev/null
ip route delete blackhole "$POD_CIDR" 2>/dev/null
if [ -f "$NODE_STATE/ip_forward.before" ]; then
  sysctl -qw net.ipv4.ip_forward="$(cat "$NODE_STATE/ip_forward.before")" && rm -f "$NODE_STATE/ip_forward.before"
fi
if [ "${1:-}" = --purge ]; then rm -rf "${NODE_STATE:?}/etcd" "${NODE_LIB:?}/kubelet"; fi
say "down"
