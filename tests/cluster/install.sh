#!/usr/bin/env bash
# One command for a local cluster with Switchboard running on real pods: starts the control
# plane and the real node (SWITCHBOARD_REAL_NODE=1 up.sh), builds the image from the working
# tree and loads it into the node (image.sh --load), installs the Helm chart (operator,
# gateway, RBAC, NetworkPolicy) as it ships, waits until the operator and the gateway are
# available, and prints the gateway's WebSocket base URL (ws://<ClusterIP>:<port>, reachable
# from this machine) as its last line. Then: kubectl apply -f examples/banking -n <ns>.
#
# The test server is Kubernetes 1.20: it cannot store the CRDs' CEL rules (Helm 4 installs
# CRDs by server-side apply, which it refuses), so the CRDs are applied here without the
# x-kubernetes-validations fields and the chart is installed with crds.install=false (the
# chart ships the CRDs as templates, so that `helm upgrade` updates them); the operator
# checks the same rules itself. On a current cluster, plain `helm install` does it all.
#
# Env: SWITCHBOARD_RELEASE (default switchboard), SWITCHBOARD_NAMESPACE (default
#      switchboard-system), SWITCHBOARD_PROFILE (cargo profile of the image; default dev),
#      SWITCHBOARD_CLUSTER_DIR. Extra arguments go to `helm upgrade --install`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RELEASE="${SWITCHBOARD_RELEASE:-switchboard}"
NS="${SWITCHBOARD_NAMESPACE:-switchboard-system}"
log() { echo "[cluster/install] $*" >&2; }

eval "$(SWITCHBOARD_REAL_NODE=1 "$HERE/up.sh" | tail -n1)"
BIN="$("$ROOT/tests/tools/install.sh" | tail -n1)"
k() { "$BIN/kubectl" "$@"; }
"$HERE/image.sh" --load >/dev/null

log "applying the CRDs (without CEL rules, for the 1.20 test server)"
# Drops each `x-kubernetes-validations:` key with the lines that belong to it (deeper, or a
# list item at its own indentation).
for f in "$ROOT"/crds/*.yaml; do
  awk '
    skip && (match($0, /^ */) && (RLENGTH > indent || (RLENGTH == indent && $0 ~ /^ *- /))) { next }
    { skip = 0 }
    /^ *x-kubernetes-validations:/ { match($0, /^ */); indent = RLENGTH; skip = 1; next }
    { print }
  ' "$f"
  echo "---"
done | k apply --server-side --force-conflicts --field-manager switchboard-install -f - >&2

log "installing the chart as release $RELEASE in $NS"
"$BIN/helm" upgrade --install "$RELEASE" "$ROOT/charts/switchboard" --namespace "$NS" --create-namespace \
  --set crds.install=false --wait --timeout 180s "$@" >&2
k -n "$NS" wait --for=condition=Available deployment --all --timeout=180s >&2
svc="$(k -n "$NS" get svc -l app.kubernetes.io/name=switchboard-gateway -o jsonpath='{.items[0].metadata.name}')"
ip="$(k -n "$NS" get svc "$svc" -o jsonpath='{.spec.clusterIP}')"
port="$(k -n "$NS" get svc "$svc" -o jsonpath='{.spec.ports[0].port}')"
log "Switchboard is up: kubectl apply -n <namespace> -f examples/banking, then talk to the gateway"
echo "ws://$ip:$port"
