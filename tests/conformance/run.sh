#!/usr/bin/env bash
# Conformance of `switchboard sim` with three independent Nova Sonic clients, run stock:
# Pipecat (pipecat-ai[aws-nova-sonic] 1.14.0), Strands Agents (strands-agents[bidi]
# 1.62.0) and LiveKit Agents (livekit-plugins-aws[realtime] 1.8.9). Each talks to one
# simulator through a conversation of several spoken turns (the drivers next to this
# script), changing only what is needed to reach a local endpoint over TLS with the
# simulator's certificate (../../../shared/TESTING.md, "Third-party Nova Sonic clients").
#
# Fails unless every turn of every client got reply audio, the clients log no
# ValidationException and no other exception, and the simulator logged no exception,
# warning or error — teardown included. One client-side exception is expected and logged
# as a warning by the LiveKit driver: AWS_ERROR_HTTP_STREAM_HAS_COMPLETED from LiveKit's
# `aclose()`, which closes the SDK's output stream before its input stream (its own
# comment calls the resulting error "mostly cosmetic"), whatever the server sends.
#
# The clients pin different experimental `aws_sdk_bedrock_runtime` versions, so each has
# its own virtual environment on Python 3.12 (pyenv's 3.12.1, or python3.12 on PATH),
# cached in $SWITCHBOARD_CACHE/conformance (default ~/.cache/switchboard), keyed by the
# constraints file that pins the client and every dependency (constraints-*.txt). Cold:
# three installs from PyPI; warm: none.
#
# Env: SWITCHBOARD_BIN      the `switchboard` binary (default: built with cargo, dev profile)
#      CONFORMANCE_CLIENTS  which clients (default "pipecat strands livekit")
#      CONFORMANCE_TURNS    spoken turns per client (default 3)
#      CONFORMANCE_KEEP=1   keep the work directory (logs) even when everything passed
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}/conformance"
CLIENTS="${CONFORMANCE_CLIENTS:-pipecat strands livekit}"
export CONFORMANCE_TURNS="${CONFORMANCE_TURNS:-3}"
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"

log() { printf '[conformance %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

requirement() { # the client's pip requirement
  case "$1" in
    pipecat) echo "pipecat-ai[aws-nova-sonic,websocket]==1.14.0" ;;
    strands) echo "strands-agents[bidi]==1.62.0" ;;
    livekit) echo "livekit-agents==1.8.9 livekit-plugins-aws[realtime]==1.8.9" ;;
    *) die "unknown client $1 (known: pipecat strands livekit)" ;;
  esac
}

python312() {
  local py
  if command -v pyenv >/dev/null && py="$(pyenv root)/versions/3.12.1/bin/python3.12" && [ -x "$py" ]; then
    echo "$py"
  elif command -v python3.12 >/dev/null; then
    command -v python3.12
  else
    die "Python 3.12 is needed (the clients' SDK requires it): install it with pyenv (3.12.1) or put python3.12 on PATH"
  fi
}

venv() { # the client's cached virtual environment, installed when missing
  local client="$1" constraints="$HERE/constraints-$1.txt" key dir
  key="$( (requirement "$client"; cat "$constraints") | sha256sum | cut -c1-12)"
  dir="$CACHE/$client-$key"
  if ! [ -f "$dir/.installed" ]; then
    log "installing $(requirement "$client") into $dir"
    rm -rf "$dir"
    "$(python312)" -m venv "$dir" >&2
    # shellcheck disable=SC2046 # the requirement may be two words
    "$dir/bin/pip" install --quiet --disable-pip-version-check -c "$constraints" $(requirement "$client") >&2 \
      || die "installing $client failed"
    touch "$dir/.installed"
  fi
  echo "$dir"
}

for client in $CLIENTS; do venv "$client" >/dev/null; done

BIN="${SWITCHBOARD_BIN:-}"
if [ -z "$BIN" ]; then
  log "building switchboard (dev)"
  (cd "$ROOT" && cargo build --quiet --locked -p switchboard-dataplane --bin switchboard) || die "cargo build failed"
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/switchboard"
fi
[ -x "$BIN" ] || die "no switchboard binary at $BIN"

WORK="$(mktemp -d -t switchboard-conformance.XXXXXX)"
SIM_PID=""
cleanup() {
  local status=$?
  if [ -n "$SIM_PID" ]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
  if [ "$status" -eq 0 ] && [ -z "${CONFORMANCE_KEEP:-}" ]; then rm -rf "$WORK"; else log "logs kept in $WORK"; fi
}
trap cleanup EXIT

# One simulator for every client; `info` logs every stream and every exception it sends.
SWITCHBOARD_LOG=info "$BIN" sim --listen 127.0.0.1:0 --script "$HERE/sim-script.yaml" \
  --cert-out "$WORK/sim-ca.pem" >"$WORK/sim.out" 2>"$WORK/sim.log" &
SIM_PID=$!
for _ in $(seq 100); do
  grep -q "^Bedrock simulator on " "$WORK/sim.out" 2>/dev/null && break
  kill -0 "$SIM_PID" 2>/dev/null || { cat "$WORK/sim.log" >&2; die "switchboard sim exited"; }
  sleep 0.1
done
ENDPOINT="$(sed -n 's/^Bedrock simulator on \(https:[^ ]*\).*/\1/p' "$WORK/sim.out")"
[ -n "$ENDPOINT" ] || die "switchboard sim did not print its endpoint"
export CONFORMANCE_ENDPOINT="$ENDPOINT" CONFORMANCE_CA_FILE="$WORK/sim-ca.pem"
log "switchboard sim on $ENDPOINT"

failed=""
for client in $CLIENTS; do
  dir="$(venv "$client")"
  from="$(wc -l <"$WORK/sim.log")"
  log "$client: $CONFORMANCE_TURNS spoken turns"
  status=0
  (cd "$HERE" && timeout 120 "$dir/bin/python" "${client}_driver.py") >"$WORK/$client.out" 2>"$WORK/$client.log" || status=$?
  sleep 0.5 # anything the simulator logs about the teardown
  problems="$(tail -n "+$((from + 1))" "$WORK/sim.log" | grep -E 'Exception|WARN|ERROR|panicked' || true)"
  # ValidationException anywhere, error log lines (logging and loguru), and the last line
  # of each Python traceback.
  client_errors="$(grep -hE 'ValidationException|^(ERROR|CRITICAL) |\| (ERROR|CRITICAL) +\||^[A-Za-z_.]*(Error|Exception)\b.*:' \
    "$WORK/$client.log" "$WORK/$client.out" || true)"
  result="$(tail -n1 "$WORK/$client.out" 2>/dev/null || true)"
  if [ "$status" -ne 0 ] || [ -n "$problems" ] || [ -n "$client_errors" ]; then
    log "$client: FAILED (exit $status) $result"
    [ -n "$problems" ] && printf '  simulator: %s\n' "$problems" >&2
    [ -n "$client_errors" ] && printf '  client: %s\n' "$client_errors" | head -5 >&2
    tail -n 20 "$WORK/$client.log" | sed 's/^/  | /' >&2
    failed="$failed $client"
  else
    log "$client: ok $result"
  fi
done

[ -z "$failed" ] || die "not conformant with:$failed"
log "all clients conformant"
