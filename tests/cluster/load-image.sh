#!/usr/bin/env bash
# Loads container images into the real node started by `SWITCHBOARD_REAL_NODE=1 up.sh`
# (there is no registry to pull from). Each argument is a docker-archive tarball, e.g. from
#   buildah push IMAGE docker-archive:FILE:NAME:TAG
# The pod must ask for exactly NAME:TAG, with an explicit tag (`:latest` means
# imagePullPolicy Always, and the pull fails) or imagePullPolicy IfNotPresent/Never.
#
# Usage: load-image.sh ARCHIVE...      Env: SWITCHBOARD_CLUSTER_DIR
set -euo pipefail
DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
SOCK="$DIR/node/containerd/containerd.sock"
[ -S "$SOCK" ] || { echo "[cluster/load-image] no node running (no $SOCK)" >&2; exit 1; }
for f in "$@"; do
  # The k8s.io namespace is the one the kubelet's CRI calls see.
  ctr -a "$SOCK" -n k8s.io images import "$f" >&2
done
