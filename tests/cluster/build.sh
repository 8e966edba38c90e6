#!/usr/bin/env bash
# Builds (once) the real kube-apiserver and kube-controller-manager from Debian's
# `kubernetes` source package and extracts etcd from Debian's `etcd-server` package.
# Binaries are cached outside the repo, keyed by version, so later runs skip the build.
#
# Prints the bin directory as its last line.
# Env: SWITCHBOARD_CACHE (default ~/.cache/switchboard).
set -euo pipefail

K8S_VERSION="1.20.5+really1.20.2"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"

log() { echo "[cluster/build] $*" >&2; }

if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/etcd" ]; then
  echo "$BIN"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Debian bookworm needs a deb-src entry for `apt-get source`.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding a deb-src entry for bookworm main"
  # deb822 form with the same Signed-By as Debian's own entry (apt refuses conflicting values).
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    | $SUDO tee /etc/apt/sources.list.d/switchboard-src.sources >/dev/null
fi
need_pkgs=""
for p in golang-go rsync dpkg-dev golang-github-modern-go-reflect2-dev make; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=" $p"
done
log "apt-get update"
$SUDO apt-get update -qq >&2
if [ -n "$need_pkgs" ]; then
  log "installing:$need_pkgs"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_pkgs >&2
fi

WORK="$CACHE/k8s-$K8S_VERSION/work"
rm -rf "$WORK"
mkdir -p "$WORK" "$BIN"

# etcd: the binary inside Debian's etcd-server package, no system service started.
if [ ! -x "$BIN/etcd" ]; then
  log "fetching etcd-server"
  (cd "$WORK" && apt-get download etcd-server >&2 && dpkg -x etcd-server_*.deb etcd-root)
  install -m 0755 "$WORK/etcd-root/usr/bin/etcd" "$BIN/etcd"
  "$BIN/etcd" --version >&2
fi
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ]; then
  rm -rf "$WORK"
  echo "$BIN"
  exit 0
fi

log "fetching the kubernetes source package"
(cd "$WORK" && apt-get source --download-only kubernetes >&2 && dpkg-source --no-check -x kubernetes_*.dsc src >&2)

SRC="$WORK/src"
# The vendored reflect2 v1.0.1 crashes the apiserver under Go >= 1.18; use Debian's v1.0.2.
log "replacing vendored modern-go/reflect2 with Debian's v1.0.2"
R2="$SRC/vendor/github.com/modern-go/reflect2"
rm -rf "$R2"
mkdir -p "$R2"
cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$R2/" 2>/dev/null || \
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go "$R2/"
rm -f "$R2"/*_test.go

# GOPATH layout: k8s.io/kubernetes -> the source tree.
GOPATH_DIR="$WORK/gopath"
mkdir -p "$GOPATH_DIR/src/k8s.io"
ln -sfn "$SRC" "$GOPATH_DIR/src/k8s.io/kubernetes"

log "building kube-apiserver and kube-controller-manager (several minutes on 2 cores)"
(
  cd "$GOPATH_DIR/src/k8s.io/kubernetes"
  export GOPATH="$GOPATH_DIR" GO111MODULE=off CGO_ENABLED=0 GOFLAGS=-mod=vendor GOCACHE="$CACHE/go-build"
  export KUBE_GIT_VERSION="v1.20.2" KUBE_GIT_TREE_STATE=clean
  unset GOFLAGS
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >&2
  for b in kube-apiserver kube-controller-manager; do
    install -m 0755 "$(find _output -type f -name "$b" -perm -u+x | head -n1)" "$BIN/$b"
  done
)
rm -rf "$WORK"
log "built into $BIN"
echo "$BIN"
