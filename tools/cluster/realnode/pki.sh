#!/usr/bin/env bash
# The node's PKI with openssl: a cluster CA, a front-proxy CA (API aggregation, for metrics-server),
# the service-account key pair, and one certificate per component. Certificates are made once
# (delete $NODE_PKI to remake them); kubeconfigs are rewritten on every run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mkdir -p "$NODE_PKI"
cd "$NODE_PKI"

# ca NAME CN: a self-signed CA
ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$2" -days 3650 -out "$1.crt" 2>/dev/null
}

# cert NAME CA CN [ORG] [SANS]: a key and a certificate signed by CA; with SANS it also serves TLS
cert() {
  local name=$1 ca=$2 cn=$3 org=${4:-} sans=${5:-} subject
  subject="/CN=$cn"; [ -n "$org" ] && subject="/O=$org/CN=$cn"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$name.key" -subj "$subject" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$sans"
    else echo "extendedKeyUsage=clientAuth"; fi
  } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

if [ ! -f ca.crt ]; then
  ca ca loadstage-node-ca
  ca front-proxy-ca loadstage-node-front-proxy-ca
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  # host clients reach the apiserver on loopback, pods through the relay (BRIDGE_IP) or the Service (SVC_IP)
  cert apiserver ca kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$BRIDGE_IP,IP:$SVC_IP"
  cert apiserver-kubelet-client ca kube-apiserver-kubelet-client system:masters
  cert front-proxy-client front-proxy-ca front-proxy-client
  cert admin ca loadstage-node-admin system:masters
  cert controller-manager ca system:kube-controller-manager
  cert scheduler ca system:kube-scheduler
  cert kube-proxy ca system:kube-proxy
  cert kubelet ca "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving ca "$NODE_NAME" "" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$BRIDGE_IP"
fi

# kubeconfig USER: USER.kubeconfig, authenticating with USER.crt
kubeconfig() {
  cat > "$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: loadstage-node
  cluster: {certificate-authority: $NODE_PKI/ca.crt, server: "https://127.0.0.1:$API_PORT"}
users:
- name: $1
  user: {client-certificate: $NODE_PKI/$1.crt, client-key: $NODE_PKI/$1.key}
contexts:
- name: loadstage-node
  context: {cluster: loadstage-node, user: $1}
current-context: loadstage-node
EOF
  chmod 600 "$1.kubeconfig"
}
for user in admin controller-manager scheduler kube-proxy kubelet; do kubeconfig "$user"; done
