#!/usr/bin/env bash
# Stops the control plane started by up.sh and removes its state.
set -uo pipefail
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
[ -d "$DIR" ] || exit 0
if [ "${1:-}" != "--keep-lock" ]; then
  exec 9>"$DIR/.lock"
  flock 9
fi
for name in kube-controller-manager kube-apiserver etcd; do
  f="$DIR/$name.pid"
  [ -f "$f" ] || continue
  pid="$(cat "$f")"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  rm -f "$f"
done
find "$DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
echo "[cluster/down] stopped" >&2
