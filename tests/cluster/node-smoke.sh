#!/usr/bin/env bash
# Smoke check of the real node started by `SWITCHBOARD_REAL_NODE=1 tests/cluster/up.sh`.
#
# Builds a tiny image here (buildah, FROM scratch, the static busybox of Debian's
# busybox-static: `httpd`, `nslookup`, `wget`), loads it into the node, then in a fresh
# namespace runs a Deployment (busybox httpd with a readiness probe) and a Service and checks:
#   - the pod is Running and Ready;
#   - it answers on its pod IP, the Service's ClusterIP and its hostPort from the host;
#   - inside the pod, loopback works (containerd's loopback CNI step);
#   - another pod resolves <svc>.<ns>.svc.cluster.local (a Service created just now, so the
#     DNS feeder kept up) and fetches the page by that name (pod -> ClusterIP -> pod on the
#     same bridge), through `kubectl exec` (the apiserver -> kubelet path);
#   - `kubectl logs` works;
# and finally deletes the namespace (waiting until its pods are gone).
#
# Env: SWITCHBOARD_CLUSTER_DIR, SWITCHBOARD_CACHE, KUBECTL (default: the pinned kubectl of
#      tests/tools/install.sh, else /usr/bin/kubectl).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
export KUBECONFIG="$DIR/kubeconfig"
IMAGE="switchboard.local/node-smoke:1"   # an explicit tag: `:latest` would force a pull
NS="node-smoke-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"

log() { echo "[node-smoke] $(date +%T) $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

[ -f "$DIR/node/env" ] || die "no node: run SWITCHBOARD_REAL_NODE=1 tests/cluster/up.sh first"
if [ -z "${KUBECTL:-}" ]; then
  KUBECTL="$("$HERE/../tools/install.sh" 2>/dev/null | tail -n1)/kubectl"
  [ -x "$KUBECTL" ] || KUBECTL=/usr/bin/kubectl
fi
k() { "$KUBECTL" "$@"; }
log "kubectl: $KUBECTL"

WORK="$(mktemp -d)"
cleanup() {
  rm -rf "$WORK"
  if [ -n "${NS_CREATED:-}" ]; then k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# --- the image -------------------------------------------------------------------------
BUSYBOX="$CACHE/node-smoke/busybox"
if [ ! -x "$BUSYBOX" ]; then
  log "fetching busybox-static"
  (cd "$WORK" && apt-get download busybox-static >&2 && dpkg -x busybox-static_*.deb bb)
  mkdir -p "$(dirname "$BUSYBOX")"
  install -m 0755 "$WORK/bb/bin/busybox" "$BUSYBOX"
fi
log "building $IMAGE"
mkdir -p "$WORK/www"
echo "switchboard node smoke" >"$WORK/www/index.html"
# A throw-away vfs store: no mounts. buildah still writes a blob-info cache to
# /var/lib/containers/cache: remove it if it was not there before.
had_varlib=""; [ -e /var/lib/containers ] && had_varlib=1
B="buildah --storage-driver vfs --root $WORK/storage --runroot $WORK/run"
c="$($B from scratch)"
$B copy "$c" "$BUSYBOX" /bin/busybox >/dev/null
$B copy "$c" "$WORK/www" /www >/dev/null
$B config --entrypoint '["/bin/busybox"]' --user 65532:65532 "$c"
$B commit -q "$c" "$IMAGE" >/dev/null
$B push -q "$IMAGE" "docker-archive:$WORK/image.tar:$IMAGE" >&2
[ -n "$had_varlib" ] || rm -rf /var/lib/containers
"$HERE/load-image.sh" "$WORK/image.tar"

# --- the workload ----------------------------------------------------------------------
log "namespace $NS: Deployment + Service + client pod"
k create namespace "$NS" >/dev/null
NS_CREATED=1
k -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1   # busybox as PID 1 ignores SIGTERM
      containers:
      - name: httpd
        image: $IMAGE
        imagePullPolicy: Never
        args: [httpd, -f, -v, -p, "8080", -h, /www]
        ports: [{containerPort: 8080, hostPort: 18080}]   # hostPort: the portmap CNI plugin
        readinessProbe:
          httpGet: {path: /index.html, port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: $IMAGE
    imagePullPolicy: Never
    args: [sleep, "3600"]
YAML

t0=$(date +%s)
k -n "$NS" rollout status deployment/web --timeout=120s >&2 || {
  k -n "$NS" describe pods >&2; die "the web pod did not become Ready"; }
k -n "$NS" wait --for=condition=Ready pod/client --timeout=120s >/dev/null || {
  k -n "$NS" describe pod client >&2; die "the client pod did not become Ready"; }
log "pods Ready after $(( $(date +%s) - t0 )) s"

POD="$(k -n "$NS" get pods -l app=web -o jsonpath='{.items[0].metadata.name}')"
PHASE="$(k -n "$NS" get pod "$POD" -o jsonpath='{.status.phase}')"
READY="$(k -n "$NS" get pod "$POD" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
POD_IP="$(k -n "$NS" get pod "$POD" -o jsonpath='{.status.podIP}')"
SVC_IP="$(k -n "$NS" get service web -o jsonpath='{.spec.clusterIP}')"
[ "$PHASE" = Running ] && [ "$READY" = True ] || die "pod $POD: phase $PHASE, Ready $READY"
log "pod $POD Running/Ready, IP $POD_IP; Service ClusterIP $SVC_IP"

# expect_page WHAT COMMAND...: COMMAND prints our page within 10 s (kube-proxy programs a
# new Service's rules within about a second of its endpoint turning ready).
expect_page() {
  local what="$1" out=""; shift
  for _ in $(seq 1 20); do
    out="$("$@" 2>&1)" && [ "$out" = "switchboard node smoke" ] && { log "ok: $what"; return 0; }
    sleep 0.5
  done
  die "$what: got '$out'"
}
expect_page "host -> pod IP" curl -sS --max-time 5 "http://$POD_IP:8080/"
expect_page "host -> ClusterIP" curl -sS --max-time 5 "http://$SVC_IP/"
NODE_IP="$(sed -n 's/^NODE_IP=//p' "$DIR/node/env")"
expect_page "host -> hostPort on the node IP" curl -sS --max-time 5 "http://$NODE_IP:18080/"
expect_page "pod -> its own loopback" k -n "$NS" exec "$POD" -- busybox wget -qO- http://127.0.0.1:8080/

NAME="web.$NS.svc.cluster.local"
ok=""
for _ in $(seq 1 20); do
  if out="$(k -n "$NS" exec client -- busybox nslookup "$NAME" 2>&1)" && grep -q "$SVC_IP" <<<"$out"; then
    ok=1; break
  fi
  sleep 0.5
done
[ -n "$ok" ] || die "client pod cannot resolve $NAME: $out"
log "ok: client pod resolves $NAME -> $SVC_IP"
expect_page "client pod -> http://$NAME/" k -n "$NS" exec client -- busybox wget -qO- "http://$NAME/"
# The short form through the pod's search path, as in-cluster clients use it.
expect_page "client pod -> http://web/" k -n "$NS" exec client -- busybox wget -qO- http://web/

ok=""
for _ in $(seq 1 10); do
  out="$(k -n "$NS" logs "$POD" 2>&1)" && grep -q 'response:200' <<<"$out" && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || die "kubectl logs shows no request in the httpd log: $out"
log "ok: kubectl logs"

# The kubelet removes a deleted pod's object once its containers, volumes and cgroups are
# gone (status manager, every 10 s); the namespace controller retries with a growing
# back-off, so the namespace can take a while longer than its pods.
log "deleting namespace $NS"
t0=$(date +%s)
k delete namespace "$NS" --wait=false >/dev/null
for _ in $(seq 1 180); do
  [ -z "$(k -n "$NS" get pods -o name 2>/dev/null)" ] && break
  sleep 1
done
[ -z "$(k -n "$NS" get pods -o name 2>/dev/null)" ] || die "pods of $NS still there after 180 s"
log "pods gone after $(( $(date +%s) - t0 )) s"
k wait --for=delete "namespace/$NS" --timeout=180s >/dev/null 2>&1 || die "namespace $NS not deleted within 180 s"
NS_CREATED=""
log "namespace deleted after $(( $(date +%s) - t0 )) s"
log "PASS"
