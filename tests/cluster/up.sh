#!/usr/bin/env bash
# Starts a real Kubernetes v1.20 control plane: etcd (loopback), kube-apiserver (TLS, token
# auth, RBAC) and kube-controller-manager (garbage collection, namespaces, Deployments ->
# ReplicaSets -> Pods, service account tokens). By default there is no scheduler or kubelet:
# Pods stay Pending, which is all most tests need, and start-up takes a few seconds.
#
# SWITCHBOARD_REAL_NODE=1 adds one real node on this machine, so Pods run:
#   - containerd (config, root, state and socket under $DIR/node/containerd) with the CRI
#     plugin, runc, and a pause image built here (no registry is reachable);
#   - kube-scheduler, kubelet and kube-proxy (iptables mode);
#   - pod networking with the bridge CNI plugin (cni0, pod subnet $POD_SUBNET);
#   - cluster DNS for Services: dnsmasq on the node IP, fed by dns-feeder.sh, which watches
#     Services and writes `<clusterIP> <svc>.<ns>.svc.cluster.local` lines.
# The node is Ready ~25 s after start (first run: + apt installs). Only one node per machine:
# the kubelet hard-codes ports 10250/10248 and a few host paths. Images are loaded with
# `tests/cluster/load-image.sh <docker-archive.tar>` (`ctr -n k8s.io images import`); name
# them with an explicit tag (not :latest) and use imagePullPolicy IfNotPresent or Never.
# $DIR/node/env has NODE_NAME, NODE_IP, CONTAINERD_SOCK, POD_SUBNET, SERVICE_RANGE for tests.
#
# How plain and node requests relate: the apiserver is ALWAYS started the node-compatible
# way (bound to 0.0.0.0, advertising the node IP, with a client certificate for the
# kubelet), which costs nothing. So a plain cluster that is already up is kept when a
# REAL_NODE request comes: only the node is started on top of it (its objects survive). A
# control plane from an older up.sh (loopback-only) or a different node IP is restarted.
# A plain request while a node runs leaves the node running.
#
# The node changes the host; everything is undone by down.sh: the sysctls the kubelet,
# kube-proxy and CNI set are saved in $DIR/node/sysctl.saved before they start, host paths
# the kubelet/containerd create are listed in $DIR/node/created-paths.
#
# Idempotent: when what was asked for is already up it only prints the export line.
# Last line of output: `export KUBECONFIG=<path>`.
#
# Env: SWITCHBOARD_CLUSTER_DIR (state, default /tmp/switchboard-cluster),
#      SWITCHBOARD_CLUSTER_PORT (apiserver port, default 26443),
#      SWITCHBOARD_ETCD_PORT (etcd client port, default 23790),
#      SWITCHBOARD_REAL_NODE (1: also start the node),
#      SWITCHBOARD_POD_SUBNET (default 10.244.0.0/24).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
PORT="${SWITCHBOARD_CLUSTER_PORT:-26443}"
ETCD_PORT="${SWITCHBOARD_ETCD_PORT:-23790}"
REAL_NODE="${SWITCHBOARD_REAL_NODE:-0}"
POD_SUBNET="${SWITCHBOARD_POD_SUBNET:-10.244.0.0/24}"
SERVICE_RANGE="10.96.0.0/16"
NODE_NAME="switchboard-node"
KUBECONFIG_PATH="$DIR/kubeconfig"
NODE="$DIR/node"

log() { echo "[cluster/up] $*" >&2; }

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9

# The node IP: the source address of the default route (no packet is sent). Pods reach the
# apiserver and the DNS server there. Without a default route: loopback (no node possible).
NODE_IP="$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n1 || true)"
[ -n "$NODE_IP" ] || NODE_IP=127.0.0.1

# alive NAME: the process in NAME.pid exists and is not a zombie (a stopped daemon stays a
# zombie for ~2 s until init reaps it).
alive() {
  local pid st
  [ -f "$DIR/$1.pid" ] || return 1
  pid="$(cat "$DIR/$1.pid")"
  st="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
api() { # PATH: GET from the apiserver as admin
  curl -sfk --max-time 5 -H "Authorization: Bearer $(cat "$DIR/token")" "https://127.0.0.1:$PORT$1"
}
apiserver_ready() { [ -f "$DIR/token" ] && api /readyz >/dev/null 2>&1; }
control_plane_up() {
  alive etcd && alive kube-apiserver && alive kube-controller-manager && apiserver_ready
}
# The running apiserver can serve pods: it advertises this node IP (see the header).
node_compatible() { [ "$(cat "$DIR/advertise-address" 2>/dev/null)" = "$NODE_IP" ] && [ "$NODE_IP" != 127.0.0.1 ]; }
NODE_DAEMONS="containerd kubelet kube-proxy kube-scheduler dnsmasq dns-feeder"
node_ready() {
  api "/api/v1/nodes/$NODE_NAME" 2>/dev/null | jq -e '
    ([.status.conditions[] | select(.type == "Ready" and .status == "True")] | length == 1)
    and ([.spec.taints[]? | select(.effect == "NoSchedule" or .effect == "NoExecute")] | length == 0)' >/dev/null 2>&1
}
node_up() {
  local d
  for d in $NODE_DAEMONS; do alive "$d" || return 1; done
  node_ready
}

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

# ---------------------------------------------------------------------------------------
# The real node (SWITCHBOARD_REAL_NODE=1).

# nftables: only its `nft` command, for down.sh to drop the (then empty) iptables tables
# the node created.
NODE_PKGS="containerd runc containernetworking-plugins iptables nftables conntrack buildah dnsmasq-base jq curl"
# Kernel settings the node changes: the kubelet (panic, overcommit, keys), kube-proxy
# (route_localnet; conntrack only without our zero flags), the bridge CNI plugin (forwarding)
# and we (bridge-nf, so Service traffic between pods on one bridge passes iptables).
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.ipv4.conf.all.route_localnet net.ipv4.ip_forward net.ipv4.conf.all.forwarding
  net.ipv4.conf.default.forwarding net.ipv6.conf.all.forwarding net.ipv6.conf.default.forwarding
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait"
# Host paths the kubelet, containerd and libcni create whatever their flags say; down.sh
# removes those that did not exist before.
HOST_PATHS="/var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /var/lib/cni
  /run/netns /etc/cni /opt/cni /usr/libexec/kubernetes /etc/kubernetes /var/lib/containerd"

sysctl_path() { echo "/proc/sys/$(echo "$1" | tr . /)"; }
sysctl_set() { local p; p="$(sysctl_path "$1")"; if [ -w "$p" ]; then echo "$2" >"$p"; fi; }

install_node_packages() {
  local p need=""
  for p in $NODE_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || need+=" $p"; done
  [ -z "$need" ] && return 0
  log "installing:$need (log: $DIR/apt.log)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need; } \
    >"$DIR/apt.log" 2>&1 || fail "apt-get failed" apt
}

# The pause image as a docker archive, cached beside the binaries (rebuilt when the pause
# binary is newer). Built with buildah into a throw-away vfs store: no mounts, no network.
pause_archive() {
  local out img="k8s.gcr.io/pause:3.2" b c
  out="$(dirname "$BIN")/images/pause-3.2.tar"
  if [ ! -s "$out" ] || [ "$BIN/pause" -nt "$out" ]; then
    log "building the pause image"
    mkdir -p "$(dirname "$out")"
    # buildah writes a blob-info cache to /var/lib/containers/cache whatever --root says.
    local had_varlib=""; [ -e /var/lib/containers ] && had_varlib=1
    b="buildah --storage-driver vfs --root $NODE/buildah/root --runroot $NODE/buildah/run"
    c="$($b from scratch)"
    $b copy "$c" "$BIN/pause" /pause >/dev/null
    $b config --entrypoint '["/pause"]' --user 65535:65535 "$c"
    $b commit -q "$c" "$img" >/dev/null
    rm -f "$out.tmp"
    $b push -q "$img" "docker-archive:$out.tmp:$img" >&2
    mv -f "$out.tmp" "$out"
    $b rm "$c" >/dev/null
    rm -rf "$NODE/buildah"
    [ -n "$had_varlib" ] || rm -rf /var/lib/containers
  fi
  echo "$out"
}

start_node() {
  [ "$NODE_IP" != 127.0.0.1 ] || { log "no default route: cannot find the node IP"; exit 1; }
  # One node per machine: the kubelet's ports are fixed.
  if ss -ltnH '( sport = :10250 or sport = :10248 )' 2>/dev/null | grep -q .; then
    log "ports 10250/10248 are in use: another kubelet runs on this machine"; exit 1
  fi
  install_node_packages
  mkdir -p "$NODE"/{containerd,cni/net.d,cni/ipam,kubelet,dns,volume-plugins}
  chmod 755 "$DIR" "$NODE" "$NODE/dns"   # dnsmasq reads the hosts dir as nobody

  # Save what we are about to change.
  local k p v
  : >"$NODE/sysctl.saved"
  for k in $SYSCTLS; do
    p="$(sysctl_path "$k")"
    [ -r "$p" ] && v="$(cat "$p")" && echo "$k=$v" >>"$NODE/sysctl.saved"
  done
  : >"$NODE/created-paths"
  for p in $HOST_PATHS; do [ -e "$p" ] || echo "$p" >>"$NODE/created-paths"; done
  # Pod network namespaces and netfilter tables that exist now are not ours (down.sh
  # removes only new ones).
  ls /run/netns 2>/dev/null >"$NODE/netns.before" || true
  nft list tables 2>/dev/null >"$NODE/nft-tables.before" || true

  sysctl_set net.ipv4.ip_forward 1
  local masq_all=""
  if [ -e "$(sysctl_path net.bridge.bridge-nf-call-iptables)" ]; then
    sysctl_set net.bridge.bridge-nf-call-iptables 1
    sysctl_set net.bridge.bridge-nf-call-ip6tables 1
  else
    # No br_netfilter: replies between pods on the bridge would bypass kube-proxy's NAT;
    # masquerading all Service traffic routes them through the host instead.
    masq_all="--masquerade-all"
  fi

  local sock="$NODE/containerd/containerd.sock"
  cat >"$NODE/env" <<ENV
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
CONTAINERD_SOCK=$sock
POD_SUBNET=$POD_SUBNET
SERVICE_RANGE=$SERVICE_RANGE
ENV

  # containerd: everything under $NODE/containerd (runc's state too: its default root is
  # /run/containerd/runc). restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and
  # without it every sandbox fails ("can't get final child's PID from pipe: EOF").
  # CNI: only the first config file is used; containerd itself brings up each pod's `lo`
  # with the loopback plugin from bin_dir (go-cni's loopback network).
  cat >"$NODE/containerd/config.toml" <<TOML
version = 2
root = "$NODE/containerd/root"
state = "$NODE/containerd/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "k8s.gcr.io/pause:3.2"
  restrict_oom_score_adj = true
  disable_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$NODE/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE/cni/net.d"
    max_conf_num = 1
TOML

  # Pod network: one bridge, host-local addresses, hostPort support. No ipMasq: pods only
  # talk to each other and to this host (apiserver, DNS), never to the outside.
  local gw="${POD_SUBNET%.*}.1"
  cat >"$NODE/cni/net.d/10-switchboard.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "switchboard",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$gw"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$NODE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI

  # Nothing can be pulled here, and nothing may try: a proxy that refuses (loopback
  # registries are never proxied) makes a pull fail at once, without a DNS query.
  log "starting containerd"
  start containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    http_proxy= https_proxy= NO_PROXY= no_proxy= \
    containerd --config "$NODE/containerd/config.toml"
  local ctr="ctr -a $sock -n k8s.io"
  for _ in $(seq 1 100); do
    [ -S "$sock" ] && $ctr version >/dev/null 2>&1 && break
    alive containerd || fail "containerd exited" containerd
    sleep 0.1
  done
  $ctr version >/dev/null 2>&1 || fail "containerd not answering after 10 s" containerd
  $ctr images import "$(pause_archive)" >/dev/null || fail "importing the pause image failed" containerd

  # Cluster DNS: dnsmasq answers cluster.local from the hosts dir (re-read on change, so no
  # restart), NXDOMAIN for unknown cluster.local names, nothing upstream (hermetic).
  log "starting dnsmasq on $NODE_IP:53 and the Service watcher"
  : >"$NODE/dns/services"
  chmod 644 "$NODE/dns/services"
  start dnsmasq dnsmasq --keep-in-foreground --log-facility=- --conf-file=/dev/null \
    --pid-file="$NODE/dnsmasq.pid" --user=nobody --group=nogroup \
    --listen-address="$NODE_IP" --bind-interfaces --port=53 \
    --no-resolv --no-hosts --bogus-priv --hostsdir="$NODE/dns" --local=/cluster.local/
  start dns-feeder bash "$HERE/dns-feeder.sh" "https://127.0.0.1:$PORT" "$DIR/token" "$NODE/dns/services"

  log "starting kube-scheduler"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_PATH" --leader-elect=false \
    --port 0 --secure-port 0 --profiling=false

  # kubelet: anonymous requests refused, the apiserver authenticates with its client cert;
  # image GC off (images cannot be pulled again here); eviction only when nearly full;
  # a 10 s resync of running pods instead of 1 min; the node's status checked every 2 s
  # (posted only on change), so it turns Ready ~2 s after its runtime and network are, not
  # 10 s; its own dirs wherever a flag allows; log level 2, which logs each pod's
  # lifecycle (SyncLoop ADD/DELETE/REMOVE, containers killed with their grace period), for
  # e2e-smoke's failures.
  # AWS_EC2_METADATA_DISABLED: the kubelet's in-tree ECR credential provider would
  # otherwise ask the EC2 metadata address (169.254.169.254) for credentials at start.
  log "starting kubelet"
  start kubelet env AWS_EC2_METADATA_DISABLED=true "$BIN/kubelet" --kubeconfig "$KUBECONFIG_PATH" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --address "$NODE_IP" \
    --container-runtime=remote --container-runtime-endpoint="unix://$sock" \
    --runtime-request-timeout=5m --pod-infra-container-image=k8s.gcr.io/pause:3.2 \
    --cgroup-driver=cgroupfs --fail-swap-on=false --oom-score-adj=0 \
    --root-dir "$NODE/kubelet" --volume-plugin-dir "$NODE/volume-plugins" \
    --cluster-dns="$NODE_IP" --cluster-domain=cluster.local \
    --anonymous-auth=false --client-ca-file "$DIR/kubelet-ca.crt" --authorization-mode=AlwaysAllow \
    --read-only-port=0 --healthz-bind-address=127.0.0.1 \
    --eviction-hard='memory.available<50Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%' \
    --image-gc-high-threshold=100 --image-gc-low-threshold=99 \
    --sync-frequency=10s --node-status-update-frequency=2s --serialize-image-pulls=false --v=2

  # kube-proxy: zero conntrack flags so it leaves the conntrack sysctls alone.
  log "starting kube-proxy"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$KUBECONFIG_PATH" --proxy-mode=iptables \
    --hostname-override "$NODE_NAME" --cluster-cidr "$POD_SUBNET" $masq_all \
    --conntrack-max-per-core=0 --conntrack-min=0 \
    --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
    --oom-score-adj=0 --healthz-bind-address=127.0.0.1:10256 \
    --metrics-bind-address=127.0.0.1:10249 --profiling=false

  # Ready: the node Ready and untainted, kube-proxy's rules in place, DNS fed.
  local d ok=""
  for _ in $(seq 1 240); do
    for d in $NODE_DAEMONS; do alive "$d" || fail "$d exited" "$d"; done
    if node_ready && iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q 'default/kubernetes' \
      && grep -q ' kubernetes\.default\.svc\.cluster\.local$' "$NODE/dns/services"; then
      ok=1; break
    fi
    sleep 0.5
  done
  [ -n "$ok" ] || fail "node not ready after 120 s" kubelet
  log "node $NODE_NAME ($NODE_IP) Ready"
}

# ---------------------------------------------------------------------------------------

if control_plane_up; then
  if [ "$REAL_NODE" != 1 ]; then
    log "already up"
    echo "export KUBECONFIG=$KUBECONFIG_PATH"
    exit 0
  fi
  if node_compatible; then
    if node_up; then
      log "already up (with the node)"
      echo "export KUBECONFIG=$KUBECONFIG_PATH"
      exit 0
    fi
    # The control plane serves pods already: add the node, keep the cluster's objects.
    BIN="$("$HERE/build.sh" | tail -n1)"
    "$HERE/down.sh" --keep-lock --node-only >/dev/null 2>&1 || true
    start_node
    echo "export KUBECONFIG=$KUBECONFIG_PATH"
    exit 0
  fi
  log "the running apiserver cannot serve pods (loopback-only): restarting the cluster"
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
# The apiserver's client certificate for the kubelet (logs, exec, port-forward): the kubelet
# trusts only this CA, so nobody else can use its API on the node IP. EC keys: ~10 ms.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
  -subj /CN=switchboard-kubelet-client-ca -keyout "$DIR/kubelet-ca.key" -out "$DIR/kubelet-ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/O=system:masters/CN=kube-apiserver" -keyout "$DIR/apiserver-kubelet-client.key" \
  -out "$DIR/apiserver-kubelet-client.csr" 2>/dev/null
openssl x509 -req -in "$DIR/apiserver-kubelet-client.csr" -CA "$DIR/kubelet-ca.crt" \
  -CAkey "$DIR/kubelet-ca.key" -CAcreateserial -days 3650 -out "$DIR/apiserver-kubelet-client.crt" \
  -extfile <(echo "extendedKeyUsage=clientAuth") 2>/dev/null

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

# Bound to all addresses and advertising the node IP: pods reach it through the
# `kubernetes` Service (a loopback endpoint is refused for it). Host clients use 127.0.0.1.
log "starting kube-apiserver on 0.0.0.0:$PORT (advertising $NODE_IP)"
echo "$NODE_IP" >"$DIR/advertise-address"
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 0.0.0.0 --advertise-address "$NODE_IP" --secure-port "$PORT" \
  --cert-dir "$DIR/certs" --token-auth-file "$DIR/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$DIR/sa.pub" --service-account-signing-key-file "$DIR/sa.key" \
  --service-cluster-ip-range "$SERVICE_RANGE" --enable-priority-and-fairness=false --profiling=false \
  --kubelet-preferred-address-types InternalIP \
  --kubelet-client-certificate "$DIR/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$DIR/apiserver-kubelet-client.key" \
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
  api /api/v1/namespaces/default/serviceaccounts/default >/dev/null 2>&1 && break
  alive kube-controller-manager || fail "kube-controller-manager exited" kube-controller-manager
  sleep 0.2
done
alive kube-controller-manager || fail "kube-controller-manager exited" kube-controller-manager
log "control plane up: https://127.0.0.1:$PORT (state in $DIR)"

[ "$REAL_NODE" != 1 ] || start_node

echo "export KUBECONFIG=$KUBECONFIG_PATH"
