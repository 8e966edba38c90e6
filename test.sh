#!/usr/bin/env bash
# Runs every Switchboard test, on a fresh machine too. It installs what the tests need
# itself: Debian packages, a real Kubernetes control plane (kube-apiserver and
# kube-controller-manager built from Debian's source package, etcd from Debian; cached in
# ~/.cache/switchboard after the first run), pinned kubectl, helm and mdBook. Then it checks
# formatting, lints, builds the book in docs/, checks the crates' layering, runs the whole
# test suite, 200 voice callers through `switchboard load`, three third-party Nova Sonic
# clients against the simulator and every fuzz target briefly, and last starts a real node
# (kubelet, kube-scheduler, kube-proxy from the same source package; containerd) and runs
# a pod on it.
#
# Env: SWITCHBOARD_KEEP_CLUSTER=1 leaves a control plane this script started running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# One build of each crate, no incremental caches: they would add ~2.5 GB to target/ for
# builds this script makes once (a CI run ran out of disk building the fuzz targets).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Each stage's start ($SECONDS), printed as it begins and as a table of durations at the
# end, on failure too (the EXIT trap), so a slow run shows where its time went.
source tests/tools/stages.sh
down_cluster=""
on_exit() {
  local rc=$?
  stage_table "$rc"
  if [ -n "$down_cluster" ]; then tests/cluster/down.sh; fi
  return "$rc"
}
trap on_exit EXIT

step "control plane"
up_err="$(mktemp)"
eval "$(tests/cluster/up.sh 2>"$up_err" | tail -n1)" || { cat "$up_err" >&2; exit 1; }
if ! grep -q "already up" "$up_err" && [ -z "${SWITCHBOARD_KEEP_CLUSTER:-}" ]; then
  down_cluster=1
fi
rm -f "$up_err"
echo "KUBECONFIG=$KUBECONFIG"

step "kubectl and helm"
tools_bin="$(tests/tools/install.sh | tail -n1)"

step "format"
cargo fmt --all --check

step "lint"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p switchboard-dataplane --no-default-features --locked -- -D warnings
# The API docs, private items included: every link resolves (clap's help texts keep their
# `<placeholders>`, which rustdoc would read as HTML).
RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links -A rustdoc::invalid_html_tags" \
  cargo doc --workspace --no-deps --document-private-items --locked

step "book"
# The documentation book (docs/, mdBook), built as a reader builds it, into docs/book. Its
# internal links and anchors, the commands its pages mark and its YAML are checked in the
# tests stage (tests/tests/book.rs).
"$tools_bin/mdbook" build docs

step "layering"
# The architecture, held by the dependency graph: no async runtime or HTTP stack under
# the API crate and the agent core, and no simulator in the shipping runtime binary.
forbid() { # package, forbidden dependency, [cargo tree flags...]
  local pkg="$1" dep="$2"; shift 2
  # `cargo tree -i` prints the paths to the dependency, or nothing (stdout) when there is none.
  local paths
  paths="$(cargo tree --locked -e normal -p "$pkg" "$@" -i "$dep" 2>/dev/null || true)"
  if [ -n "$paths" ]; then
    echo "layering: $pkg must not depend on $dep:" >&2
    echo "$paths" >&2
    exit 1
  fi
}
for pkg in switchboard-crds switchboard-protocol switchboard-audio switchboard-core switchboard-opus switchboard-webrtc switchboard-sip; do
  for dep in tokio hyper aws-sdk-bedrockruntime; do forbid "$pkg" "$dep"; done
done
forbid switchboard-dataplane switchboard-sim --no-default-features
# A certificate generator ships only for WebRTC's DTLS (a self-signed certificate per edge,
# its fingerprint in the SDP answer, as WebRTC requires): rcgen comes in through str0m's
# DTLS (dimpl), under switchboard-webrtc-edge, and nothing else — not the simulator's TLS.
rcgen_users="$(cargo tree -p switchboard-dataplane --no-default-features -e normal -i rcgen --depth 1 --prefix none --locked | tail -n +2)"
if printf '%s\n' "$rcgen_users" | grep -v '^dimpl ' | grep -q .; then
  echo "layering: the shipping dataplane links rcgen other than through WebRTC's DTLS (dimpl):" >&2
  echo "$rcgen_users" >&2
  exit 1
fi
# The runtime server stands below the binary's other concepts, which use it: no simulator
# (local mode's), no Polly client (the scenario runner's), no gateway (handoffs are the
# gateway's; the runtime only checks what it signed).
for dep in switchboard-sim rcgen aws-sdk-polly switchboard-gateway; do forbid switchboard-runtime "$dep"; done
# Nor the concepts that stand on it: local mode, the scenario runner, the demo tool server,
# the web console.
for dep in switchboard-local switchboard-scenario switchboard-demo-tools switchboard-console; do
  forbid switchboard-runtime "$dep"
done
# The scenario runner without its `local` feature (the shipping binary's `switchboard test
# --gateway`) needs neither local mode nor the simulator; the shipping binary has no local mode.
for dep in switchboard-local switchboard-sim rcgen; do forbid switchboard-scenario "$dep"; done
forbid switchboard-dataplane switchboard-local --no-default-features
# The load generator is a client of the session protocol, as the scenario runner is (whose
# scenario files, WAV reader and Polly rendering it uses): no gateway, runtime, local mode
# or simulator under it.
for dep in switchboard-gateway switchboard-runtime switchboard-local switchboard-sim rcgen; do
  forbid switchboard-load "$dep"
done
# The web console stands on the gateway, not on local mode or the simulator; the demo tool
# server is a leaf that needs neither the gateway nor the runtime.
for dep in switchboard-local switchboard-sim; do forbid switchboard-console "$dep"; done
for dep in switchboard-gateway switchboard-runtime switchboard-sim; do forbid switchboard-demo-tools "$dep"; done
# The gateway knows no client channel: the WebRTC edge stands on it (through its channel
# hook), never the reverse, so the gateway links no WebRTC stack and no certificate generator.
for dep in switchboard-webrtc-edge switchboard-webrtc str0m rcgen; do forbid switchboard-gateway "$dep"; done
# The edge is a client of the gateway alone: no runtime, local mode or simulator under it.
for dep in switchboard-runtime switchboard-local switchboard-sim; do forbid switchboard-webrtc-edge "$dep"; done
# The model quota is counted below the gateway, knowing no session: no gateway, agent core
# (the session protocol), runtime, local mode, simulator or HTTP server under it.
for dep in switchboard-gateway switchboard-core switchboard-runtime switchboard-local switchboard-sim axum hyper; do
  forbid switchboard-capacity "$dep"
done
# Outage mode is judged below the gateway too, knowing no socket: no gateway, agent core,
# runtime, local mode, simulator, HTTP server or Kubernetes client under it (the gateway
# performs the fallback on the client's socket and publishes the Events).
for dep in switchboard-gateway switchboard-core switchboard-runtime switchboard-local switchboard-sim axum hyper kube-client; do
  forbid switchboard-outage "$dep"
done
# The operator hands runtime pods the gateway's public key as text; it needs no agent core.
forbid switchboard-operator switchboard-core
# The Opus wrapper both media edges share stands below both: neither edge, nor the session
# protocol or the agent core, under it.
for dep in switchboard-sip switchboard-webrtc switchboard-core switchboard-protocol; do forbid switchboard-opus "$dep"; done
echo "crds, core, webrtc and sip: no tokio, hyper or AWS SDK; the gateway: no WebRTC edge, stack or rcgen; the edge: no runtime, local mode or simulator; the shipping dataplane and the runtime: no simulator (the runtime: no local mode, scenario runner, demo tools, console or gateway either); the scenario runner without \`local\`: no local mode or simulator; the load generator: no gateway, runtime, local mode or simulator; capacity: no gateway, agent core, runtime, local mode, simulator or HTTP server; outage: no gateway, agent core, runtime, local mode, simulator, HTTP server or Kubernetes client; the operator: no agent core; opus: no SIP or WebRTC crate, session protocol or agent core"

step "tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
step "load (200 voice callers)"
# `switchboard load`: 200 simulated voice callers against local mode and its simulator
# (issue 43's load test), alone on the machine: among the suite a debug build's 200 sessions
# time out on two cores.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --run-ignored only -E 'binary(load)' --no-capture
else
  cargo test --locked -p switchboard-dataplane --test load -- --ignored --nocapture
fi
step "Nova Sonic clients"
# Pipecat, Strands and LiveKit Agents, stock, each through a spoken conversation with the
# simulator (Python 3.12 environments cached in ~/.cache/switchboard/conformance). The
# binary the tests stage built: `cargo build -p switchboard-dataplane` would resolve other
# features than the workspace's test build and compile it and its dependencies again.
SWITCHBOARD_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/switchboard" tests/conformance/run.sh

step "fuzz (smoke)"
# Every cargo-fuzz target of fuzz/ built (stable toolchain, unoptimised: the optimised
# build takes ~12 minutes here) and run for 10 s; the long runs and their figures are in
# FUZZING.md.
FUZZ_PROFILE=dev FUZZ_JOBS=2 fuzz/run.sh 10
# The instrumented build (~2.5 GB) is kept for the next run unless the disk runs short.
fuzz_dir="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}}"
fuzz_dir="${fuzz_dir:-fuzz/target}"
free_kb="$(df -Pk . | awk 'NR==2 {print $4}')"
if [ "${free_kb:-0}" -lt $((20 * 1024 * 1024)) ]; then
  echo "under 20 GiB free: removing the fuzz build $fuzz_dir"
  rm -rf "$fuzz_dir"
fi

step "real node"
# A kubelet, containerd, pod networking, kube-proxy and Service DNS next to the control
# plane (tests/cluster/up.sh), proven by running a pod built here (tests/cluster/node-smoke.sh).
SWITCHBOARD_REAL_NODE=1 tests/cluster/up.sh >/dev/null
tests/cluster/node-smoke.sh
# The image built from this tree, and the Example Bank's runtime pods (as the operator
# renders them) Available on the node.
tests/cluster/image-smoke.sh
# helm install (operator and gateway from that image), examples/banking Ready on real pods,
# conversations through the gateway's Service against a simulator on this machine, pods and
# replicas deleted and rolled under live sessions (tests/TESTING.md says what this proves).
tests/cluster/e2e-smoke.sh
