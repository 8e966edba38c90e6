#!/usr/bin/env bash
# Builds (once) the real Kubernetes v1.20.2 binaries from Debian's `kubernetes` source
# package, extracts etcd from Debian's `etcd-server` package and compiles the pause binary
# (`build/pause/linux/pause.c` of the same source tree) for the node's sandbox image.
#
#   control plane: kube-apiserver, kube-controller-manager, etcd
#   real node:     kubelet, kube-scheduler, kube-proxy, pause
#
# All of them are cached outside the repo in one bin dir keyed by the version, so later
# runs skip the build. A cache from an older version of this script (only apiserver and
# controller-manager) leads to a build of just the missing binaries, not a failure.
# The Go build cache is kept in $CACHE/go-build: a rebuild after the bin dir was removed
# takes ~2.5 min instead of ~10.
#
# Prints the bin directory as its last line.
# Env: SWITCHBOARD_CACHE (default ~/.cache/switchboard).
set -euo pipefail

K8S_VERSION="1.20.5+really1.20.2"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
GOCACHE_DIR="$CACHE/go-build"
K8S_BINS="kube-apiserver kube-controller-manager kubelet kube-scheduler kube-proxy"

log() { echo "[cluster/build] $*" >&2; }

# missing: the cached binaries that are absent ("" when all are there).
missing() {
  local b m=""
  for b in $K8S_BINS etcd pause; do [ -x "$BIN/$b" ] || m+=" $b"; done
  echo "$m"
}

if [ -z "$(missing)" ]; then
  echo "$BIN"
  exit 0
fi

# Two builds at once (two cluster dirs, two test runs) would share $WORK: serialise them,
# and look again once we hold the lock (the other one may have built everything).
mkdir -p "$BIN"
exec 8>"$CACHE/k8s-$K8S_VERSION/.build.lock"
flock 8
if [ -z "$(missing)" ]; then
  echo "$BIN"
  exit 0
fi
log "missing:$(missing)"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Debian bookworm needs a deb-src entry for `apt-get source`.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding a deb-src entry for bookworm main"
  # deb822 form with the same Signed-By as Debian's own entry (apt refuses conflicting values).
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    | $SUDO tee /etc/apt/sources.list.d/switchboard-src.sources >/dev/null
fi
# gcc + libc6-dev: the pause binary is linked statically (libc.a is in libc6-dev).
need_pkgs=""
for p in golang-go rsync dpkg-dev golang-github-modern-go-reflect2-dev make gcc libc6-dev; do
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
mkdir -p "$WORK" "$GOCACHE_DIR"
trap 'rm -rf "$WORK"' EXIT

# put NAME FILE: install into the bin dir atomically, so an interrupted copy never looks
# like a cached binary.
put() {
  install -m 0755 "$2" "$BIN/.$1.tmp"
  mv -f "$BIN/.$1.tmp" "$BIN/$1"
}

# etcd: the binary inside Debian's etcd-server package, no system service started.
if [ ! -x "$BIN/etcd" ]; then
  log "fetching etcd-server"
  (cd "$WORK" && apt-get download etcd-server >&2 && dpkg -x etcd-server_*.deb etcd-root)
  put etcd "$WORK/etcd-root/usr/bin/etcd"
  "$BIN/etcd" --version >&2
fi

WHAT=""
for b in $K8S_BINS; do [ -x "$BIN/$b" ] || WHAT+=" cmd/$b"; done
if [ -z "$WHAT" ] && [ -x "$BIN/pause" ]; then
  echo "$BIN"
  exit 0
fi

log "fetching the kubernetes source package"
(cd "$WORK" && apt-get source --download-only kubernetes >&2 && dpkg-source --no-check -x kubernetes_*.dsc src >&2)
SRC="$WORK/src"

# The pause binary of the node's sandbox image (tagged k8s.gcr.io/pause:3.2 by up.sh, the
# name containerd's sandbox_image asks for). Same flags as build/pause/Makefile.
if [ ! -x "$BIN/pause" ]; then
  log "compiling pause"
  gcc -Os -Wall -Werror -static -DVERSION=v3.2-switchboard \
    -o "$WORK/pause" "$SRC/build/pause/linux/pause.c" >&2
  put pause "$WORK/pause"
fi

if [ -n "$WHAT" ]; then
  # The vendored reflect2 v1.0.1 crashes the apiserver under Go >= 1.18; use Debian's v1.0.2.
  log "replacing vendored modern-go/reflect2 with Debian's v1.0.2"
  R2="$SRC/vendor/github.com/modern-go/reflect2"
  rm -rf "$R2"
  mkdir -p "$R2"
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$R2/" 2>/dev/null || \
    cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go "$R2/"
  rm -f "$R2"/*_test.go

  # hack/lib/golang.sh sets its own GOPATH (_output/local/go, with k8s.io/kubernetes
  # linked to the tree) and exports GOCACHE=_output/local/go/cache, overriding ours; that
  # dir would vanish with $WORK. Make it a link to the persistent cache. The tree's path is
  # the same on every run, so the cached compile results match.
  mkdir -p "$SRC/_output/local/go"
  ln -sfn "$GOCACHE_DIR" "$SRC/_output/local/go/cache"

  log "building$WHAT (cold ~10 min on 2 cores, ~2.5 min with a warm Go cache)"
  (
    cd "$SRC"
    export GO111MODULE=off CGO_ENABLED=0
    export KUBE_GIT_VERSION="v1.20.2" KUBE_GIT_TREE_STATE=clean
    unset GOFLAGS
    make WHAT="${WHAT# }" >&2
    for c in $WHAT; do
      b="${c#cmd/}"
      f="_output/local/bin/linux/amd64/$b"
      [ -x "$f" ] || f="$(find _output -type f -name "$b" -perm -u+x | head -n1)"
      put "$b" "$f"
    done
  )
fi

m="$(missing)"
[ -z "$m" ] || { log "still missing after the build:$m"; exit 1; }
log "built into $BIN"
echo "$BIN"
