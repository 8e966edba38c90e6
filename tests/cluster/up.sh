#!/usr/bin/env bash
# Starts a real Kubernetes control plane on loopback: etcd, kube-apiserver (TLS, token
# auth, RBAC) and kube-controller-manager (garbage collection, namespaces, Deployments ->
# ReplicaSets -> Pods, service account tokens). There is no scheduler or kubelet.
#
# Idempotent: when the cluster is already up it only prints the export line.
# Last line of output: `export KUBECONFIG=<path>`.
#
# Env: SWITCHBOARD_CLUSTER_DIR (state, default /tmp/switchboard-cluster),
#      SWITCHBOARD_CLUSTER_PORT (apiserver port, default 26443),
#      SWITCHBOARD_ETCD_PORT (etcd client port, default 23790).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
PORT="${SWITCHBOARD_CLUSTER_PORT:-26443}"
ETCD_PORT="${SWITCHBOARD_ETCD_PORT:-23790}"
KUBECONFIG_PATH="$DIR/kubeconfig"

log() { echo "[cluster/up] $*" >&2; }

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9

alive() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }
apiserver_ready() {
  [ -f "$DIR/token" ] && curl -sfk --max-time 2 -H "Authorization: Bearer $(cat "$DIR/token")" \
    "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1
}

if alive etcd && alive kube-apiserver && alive kube-controller-manager && apiserver_ready; then
  log "already up"
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
  exit 0
fi

BIN="$("$HERE/build.sh" | tail -n1)"
for c in curl openssl; do
  command -v "$c" >/dev/null || { log "installing $c"; apt-get install -y -qq "$c" >&2; }
done

# Something half-up (a crashed run): stop it and start clean.
"$HERE/down.sh" --keep-lock >/dev/null 2>&1 || true
mkdir -p "$DIR/certs" "$DIR/etcd"

TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$TOKEN" >"$DIR/token"
echo "$TOKEN,admin,admin,system:masters" >"$DIR/tokens.csv"
openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
openssl rsa -in "$DIR/sa.key" -pubout -out "$DIR/sa.pub" 2>/dev/null

cat >"$KUBECONFIG_PATH" <<KC
apiVersion: v1
kind: Config
clusters:
- name: switchboard-test
  cluster:
    server: https://127.0.0.1:$PORT
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: switchboard-test
  context:
    cluster: switchboard-test
    user: admin
    namespace: default
current-context: switchboard-test
KC

start() { # name, command...
  local name="$1"; shift
  # Close the lock descriptor (9): a daemon that inherits it would hold the lock forever.
  setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$DIR/$name.pid"
}

fail() {
  log "$1; last lines of $2.log:"
  tail -n 30 "$DIR/$2.log" >&2 || true
  exit 1
}

log "starting etcd on 127.0.0.1:$ETCD_PORT"
start etcd "$BIN/etcd" --data-dir "$DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" --unsafe-no-fsync --log-level warn
for _ in $(seq 1 100); do
  curl -sf --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && break
  alive etcd || fail "etcd exited" etcd
  sleep 0.1
done

log "starting kube-apiserver on 127.0.0.1:$PORT"
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$PORT" \
  --cert-dir "$DIR/certs" --token-auth-file "$DIR/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$DIR/sa.pub" --service-account-signing-key-file "$DIR/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 --enable-priority-and-fairness=false --profiling=false \
  --enable-admission-plugins NamespaceLifecycle,ServiceAccount,DefaultStorageClass,ResourceQuota,LimitRanger
for _ in $(seq 1 300); do
  apiserver_ready && break
  alive kube-apiserver || fail "kube-apiserver exited" kube-apiserver
  sleep 0.2
done
apiserver_ready || fail "kube-apiserver not ready after 60 s" kube-apiserver

log "starting kube-controller-manager"
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$KUBECONFIG_PATH" --leader-elect=false \
  --service-account-private-key-file "$DIR/sa.key" --root-ca-file "$DIR/certs/apiserver.crt" \
  --bind-address 127.0.0.1 --secure-port 0 --port 0 --profiling=false \
  --controllers '*,-csrsigning,-nodeipam,-cloud-node-lifecycle,-route,-service,-persistentvolume-binder,-attachdetach'
# Ready when the service account controller has created the default service account.
for _ in $(seq 1 300); do
  curl -sfk --max-time 2 -H "Authorization: Bearer $TOKEN" \
    "https://127.0.0.1:$PORT/api/v1/namespaces/default/serviceaccounts/default" >/dev/null 2>&1 && break
  alive kube-controller-manager || fail "kube-controller-manager exited" kube-controller-manager
  sleep 0.2
done
alive kube-controller-manager || fail "kube-controller-manager exited" kube-controller-manager

log "up: https://127.0.0.1:$PORT (state in $DIR)"
echo "export KUBECONFIG=$KUBECONFIG_PATH"
