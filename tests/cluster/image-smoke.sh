#!/usr/bin/env bash
# The image on the real node: builds it from this tree (image.sh --load), renders the
# Example Bank with `switchboard-operator render` (exactly the objects the operator would
# create: ConfigMaps, Deployments with the restricted security context and read-only root
# filesystem, Services), applies them in a fresh namespace, and checks that every runtime
# Deployment becomes Available — its containers start from the image, read their spec, pass
# their probes — that they run as 65532 without a shell, and log JSON lines. Then deletes
# the namespace.
#
# Needs `SWITCHBOARD_REAL_NODE=1 tests/cluster/up.sh`. Env: SWITCHBOARD_CLUSTER_DIR, KUBECTL.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
export KUBECONFIG="$DIR/kubeconfig"
NS="image-smoke-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
log() { echo "[image-smoke] $(date +%T) $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
[ -f "$DIR/node/env" ] || die "no node: run SWITCHBOARD_REAL_NODE=1 tests/cluster/up.sh first"
if [ -z "${KUBECTL:-}" ]; then
  KUBECTL="$("$ROOT/tests/tools/install.sh" 2>/dev/null | tail -n1)/kubectl"
  [ -x "$KUBECTL" ] || KUBECTL=/usr/bin/kubectl
fi
k() { "$KUBECTL" "$@"; }

IMAGE="$("$HERE/image.sh" --load | tail -n2 | head -n1)"
log "image $IMAGE loaded"
dir="${SWITCHBOARD_PROFILE:-dev}"; [ "$dir" = dev ] && dir=debug; [ "$dir" = shipping ] && dir=release-operator
OPERATOR="${CARGO_TARGET_DIR:-$ROOT/target}/$dir/switchboard-operator"

WORK="$(mktemp -d)"
cleanup() {
  rm -rf "$WORK"
  k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT
# The objects the operator would create, for the image it would use; HPAs are left out
# (the test server has no metrics).
"$OPERATOR" render -f "$ROOT/examples/banking" --runtime-image "$IMAGE" >"$WORK/all.yaml"
awk -v ns="$NS" 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/kind: HorizontalPodAutoscaler/ {gsub(/namespace: default/, "namespace: " ns); print}' \
  "$WORK/all.yaml" >"$WORK/objects.yaml"
k create namespace "$NS" >/dev/null
k apply -f "$WORK/objects.yaml" >/dev/null
log "waiting for every runtime Deployment in $NS to become Available"
k -n "$NS" wait --for=condition=Available deployment --all --timeout=180s >&2 \
  || { k -n "$NS" get pods -o wide >&2; k -n "$NS" describe pods >&2 | tail -n 40; die "not Available"; }
deployments="$(k -n "$NS" get deployments -o name | wc -l)"
[ "$deployments" -ge 4 ] || die "expected the 4 Example Bank agents, got $deployments"
ready="$(k -n "$NS" get pods -o jsonpath='{range .items[*]}{.status.containerStatuses[0].ready}{"\n"}{end}' | grep -c true)"
log "ok: $deployments Deployments Available, $ready runtime pods ready"
user="$(k -n "$NS" exec deploy/triage -- switchboard --version 2>&1)" || die "exec: $user"
if k -n "$NS" exec deploy/triage -- sh -c true >/dev/null 2>&1; then die "the image has a shell"; fi
log "ok: $user runs; no shell in the image"
k -n "$NS" get pod -l switchboard.dev/agent=triage -o jsonpath='{.items[0].spec.securityContext.runAsUser}' | grep -qx 65532 \
  || die "not running as 65532"
k -n "$NS" logs deploy/triage | head -n1 | grep -q '^{"timestamp"' || die "runtime logs are not JSON lines"
log "ok: runs as 65532, read-only root filesystem, JSON logs"
log "PASS"
