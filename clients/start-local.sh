# Sourced by the clients' package tests: starts `$SWITCHBOARD_BIN local examples/banking` on
# a free port (no SIP listener, no record file) in the background and sets LOCAL_ADDR to its
# host:port once it serves, LOCAL_PID to its process. The caller kills it (stop_local).
# Args: the repository root, a folder for its log.
start_local() {
  local root="$1" dir="$2" deadline=$((SECONDS + 120))
  : "${SWITCHBOARD_BIN:?the switchboard binary}"
  SWITCHBOARD_LOG=warn NO_PROXY=127.0.0.1,localhost "$SWITCHBOARD_BIN" local "$root/examples/banking" \
    --port 0 --sip-listen off --record-database-url off >"$dir/local.log" 2>&1 &
  LOCAL_PID=$!
  LOCAL_ADDR=""
  until LOCAL_ADDR="$(sed -n 's|.*Web page: http://\([^/ ]*\)/.*|\1|p' "$dir/local.log" | head -n1)" && [ -n "$LOCAL_ADDR" ]; do
    if ! kill -0 "$LOCAL_PID" 2>/dev/null; then
      echo "switchboard local exited:" >&2; cat "$dir/local.log" >&2; return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "switchboard local was not up in 120 s:" >&2; cat "$dir/local.log" >&2; return 1
    fi
    sleep 0.2
  done
}

stop_local() {
  [ -z "${LOCAL_PID:-}" ] || { kill "$LOCAL_PID" 2>/dev/null; wait "$LOCAL_PID" 2>/dev/null || true; }
}
