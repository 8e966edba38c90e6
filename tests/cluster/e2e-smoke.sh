#!/usr/bin/env bash
# Switchboard on real pods, end to end. install.sh (the image built here, the chart with the
# operator and the gateway on the real node), set up so that runtime pods call a Bedrock
# simulator on this machine (the chart's runtime.bedrock.endpoint and caBundle: a
# certificate issued here for the node's address) and the gateway replicas share a Redis
# on this machine. Then, in a fresh namespace: examples/banking and its demo tool server
# (examples/banking/tools), every Agent Ready because its pods really pass their probes; a
# client of the gateway's Service gets triage's greeting; conversations on real pods (the
# ignored `pods` tests of switchboard-dataplane, run here one at a time): triage -> idv by
# voice -> banking -> back to triage on one socket, a runtime pod deleted mid-session, a
# Persona edit rolling the pods under a live voice call, a gateway replica deleted and its
# client resuming on another, one model quota shared by the two replicas, AgentTests run as Jobs (one gating a rollout, one judged and
# spoken, its judge and Amazon Polly the simulator, trusted through the same caBundle); a
# phone call (baresip) through the chart's SIP edge on the node's network to triage's number,
# its reply heard, and again with the edge behind a UDP LoadBalancer Service, from a caller
# in a network namespace of its own (an outside address, which the edge's trunk admits); WebRTC calls to the gateway on the node's network (UDP and ICE-TCP) and
# then behind a UDP LoadBalancer Service; the operator's NetworkPolicy applied; the operator's leader pod
# deleted, the other replica taking over. The gateway records every session into a
# PostgreSQL on this machine (gateway.record): the conversations above are in it, with the
# Agents they went through, read back with `switchboard sessions`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { echo "[e2e-smoke] $(date +%T) $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

DIR="${SWITCHBOARD_CLUSTER_DIR:-/tmp/switchboard-cluster}"
RNS="${SWITCHBOARD_NAMESPACE:-switchboard-system}"
RELEASE="${SWITCHBOARD_RELEASE:-switchboard}"
SIM_PORT="${SWITCHBOARD_E2E_SIM_PORT:-28443}"
REDIS_PORT="${SWITCHBOARD_E2E_REDIS_PORT:-26379}"
PG_PORT="${SWITCHBOARD_E2E_PG_PORT:-25432}"
# The chart's SIP edge on the node's network (sip.exposure hostNetwork): its SIP port and
# RTP range are this machine's.
SIP_PORT="${SWITCHBOARD_E2E_SIP_PORT:-25060}"
SIP_RTP_FIRST="${SWITCHBOARD_E2E_SIP_RTP_FIRST:-25100}"
eval "$(SWITCHBOARD_REAL_NODE=1 "$HERE/up.sh" | tail -n1)"
NODE_IP="$(sed -n 's/^NODE_IP=//p' "$DIR/node/env")"
BIN="$("$ROOT/tests/tools/install.sh" | tail -n1)"
k() { "$BIN/kubectl" "$@"; }
NS="e2e-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
REDIS_PID=""
SIM_PID=""
PHONE_DIR="$DIR/e2e-phone"
# A caller from outside this machine (the SIP edge behind a load balancer): a network
# namespace of its own, joined to this machine by a veth pair on a /30 of PHONE_NET.
PHONE_NETNS="sb-e2e-phone"
PHONE_VETH="sbe2e-host"
PHONE_NET="${SWITCHBOARD_E2E_PHONE_NET:-10.250.99}"
PG_DIR="$DIR/e2e-pg"
pg() { # runs a PostgreSQL tool as the postgres user (it refuses root)
  local tool; tool="$(readlink -f "$BIN/$1")"; shift
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$tool" "$@"; else "$tool" "$@"; fi
}
cleanup() {
  k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  [ -z "$REDIS_PID" ] || kill "$REDIS_PID" 2>/dev/null || true
  [ -z "$SIM_PID" ] || kill "$SIM_PID" 2>/dev/null || true
  iptables -D INPUT -p udp -d "$NODE_IP" --dport "${WEBRTC_PORT:-0}" -j DROP 2>/dev/null || true
  ip link del "$PHONE_VETH" 2>/dev/null || true
  ip netns del "$PHONE_NETNS" 2>/dev/null || true
  [ ! -d "$PG_DIR/data" ] || pg pg_ctl -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# A CA of this test's (what the runtime pods trust) and the simulator's certificate it
# issues for the address pods reach this machine on.
PKI="$DIR/e2e-pki"
mkdir -p "$PKI"
if ! openssl x509 -in "$PKI/sim.pem" -noout -checkip "$NODE_IP" 2>/dev/null | grep -q "does match"; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=switchboard-e2e-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=switchboard-e2e-sim" \
    -keyout "$PKI/sim.key" -out "$PKI/sim.csr" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:%s\n' \
    "$NODE_IP" >"$PKI/sim.ext"
  openssl x509 -req -in "$PKI/sim.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial -days 30 \
    -extfile "$PKI/sim.ext" -out "$PKI/sim.pem" 2>/dev/null
fi
# The gateway replicas' shared store: a Redis on this machine, with a password.
REDIS_PASSWORD="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
redis-server --bind "$NODE_IP" --port "$REDIS_PORT" --requirepass "$REDIS_PASSWORD" --save "" --appendonly no \
  --logfile "$DIR/e2e-redis.log" >/dev/null 2>&1 &
REDIS_PID=$!
# The conversation record's database: a PostgreSQL on this machine, with a password.
PG_PASSWORD="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
pg pg_ctl -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
rm -rf "$PG_DIR" && mkdir -p "$PG_DIR"
[ "$(id -u)" != 0 ] || chown postgres:postgres "$PG_DIR"
printf '%s\n' "$PG_PASSWORD" >"$PG_DIR/pw" && chmod 0644 "$PG_DIR/pw"
pg initdb -D "$PG_DIR/data" -U switchboard --pwfile="$PG_DIR/pw" --auth=scram-sha-256 -E UTF8 >/dev/null
echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PG_DIR/data/pg_hba.conf"
pg pg_ctl -D "$PG_DIR/data" -w -l "$PG_DIR/log" \
  -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=$NODE_IP -c fsync=off" start >/dev/null
RECORD_URL="postgres://switchboard:$PG_PASSWORD@$NODE_IP:$PG_PORT/postgres"
# The Example Bank's redaction rules (account numbers, sort codes), as a platform team sets
# them; and one live model stream in the pool QUOTA_POOL, which no Agent is in until the pods
# test of the quota the two gateway replicas share moves triage there (dataplane/tests/pods/quota.rs).
QUOTA_POOL="e2e-quota/us-east-1"
cat >"$DIR/e2e-values.yaml" <<YAML
gateway:
  record:
    redact:
      account: '\b\d{8}\b'
      sort-code: '\b\d{2}-\d{2}-\d{2}\b'
  capacity:
    quotas:
      "$QUOTA_POOL": 1
YAML

URL="$("$HERE/install.sh" --set "runtime.bedrock.endpoint=https://$NODE_IP:$SIM_PORT" \
  --set-file "runtime.bedrock.caBundle=$PKI/ca.pem" \
  --set "gateway.redis.url=redis://:$REDIS_PASSWORD@$NODE_IP:$REDIS_PORT" \
  --set "gateway.record.databaseUrl=$RECORD_URL" -f "$DIR/e2e-values.yaml" \
  --set "operator.agentSecrets[0]=$NS/bedrock-credentials" \
  --set "operator.agentSecrets[1]=$NS/agent-test-aws" \
  --set gateway.openTestSessions=true \
  --set sip.enabled=true --set sip.port="$SIP_PORT" --set sip.logFormat=text \
  --set sip.rtpPorts.first="$SIP_RTP_FIRST" --set sip.rtpPorts.last="$((SIP_RTP_FIRST + 19))" | tail -n1)"
export KUBECONFIG="$DIR/kubeconfig"
k create namespace "$NS" >/dev/null
# The simulator ignores signatures, but the pods' AWS SDK wants credentials to sign with.
k -n "$NS" create secret generic bedrock-credentials \
  --from-literal=AWS_ACCESS_KEY_ID=AKIDSWITCHBOARDE2E --from-literal=AWS_SECRET_ACCESS_KEY=not-a-secret >/dev/null
k -n "$NS" apply -f "$ROOT/examples/banking" >/dev/null
# The demo tool server acts only for callers the gateway vouches for, from this namespace's
# Agents: it needs the gateway's public key (as banking-tools.yaml says), copied here from
# the ConfigMap the gateway writes at start.
# Its name follows the release's full name (`<release>-switchboard-gateway-public-key`, or
# `switchboard-gateway-public-key` for a release called switchboard): found by its suffix.
deadline=$((SECONDS + 120))
until KEY_CM="$(k -n "$RNS" get configmap -o name | sed -n 's|^configmap/\(.*-gateway-public-key\)$|\1|p' | head -n1)" \
  && [ -n "$KEY_CM" ] \
  && GATEWAY_KEY="$(k -n "$RNS" get configmap "$KEY_CM" -o jsonpath='{.data.public-key}' 2>/dev/null)" \
  && [ -n "$GATEWAY_KEY" ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the gateway did not publish its public key in $RNS (a ConfigMap *-gateway-public-key)"
  sleep 2
done
k -n "$NS" create configmap switchboard-gateway-public-key --from-literal=public-key="$GATEWAY_KEY" >/dev/null
k -n "$NS" apply -k "$ROOT/examples/banking/tools" >/dev/null
# triage answers a phone number of this run's (spec.telephony.numbers, in place of the
# example's +442079460000), for the call through the chart's SIP edge below; patched with the
# credentials, in the same rollout. Why not the example's number: the chart's operator is
# cluster-wide, and a number is one Agent's in an operator's view, the earliest claim keeping
# it; this control plane still holds copies of the example from the test stage (namespaces
# being deleted, or left by a run that was killed), older than this one, so this triage
# would wait with NumberTaken. (The merge patch replaces the list of numbers and keeps the
# example's people.)
TRIAGE_NUMBER="+4420794$(od -An -N4 -tu4 /dev/urandom | tr -d ' ' | tail -c 7)"
for agent in $(k -n "$NS" get agents -o name); do
  telephony=""
  [ "$agent" != agent.switchboard.dev/triage ] || telephony=",\"telephony\":{\"numbers\":[\"$TRIAGE_NUMBER\"]}"
  k -n "$NS" patch "$agent" --type merge \
    -p "{\"spec\":{\"credentials\":{\"secretRef\":{\"name\":\"bedrock-credentials\"}}$telephony}}" >/dev/null
done
k -n "$NS" get agent triage -o jsonpath='{.spec.telephony.numbers[0]}' | grep -qx "$TRIAGE_NUMBER" \
  || die "triage does not claim $TRIAGE_NUMBER"
log "waiting for the Example Bank's Agents and its tool server in $NS"
k -n "$NS" wait --for=condition=Ready agents --all --timeout=180s >&2 || { k -n "$NS" get agents,pods >&2; die "Agents not Ready"; }
# Ready means a ready pod; the credentials above also rolled every Deployment, and the
# chart's values rolled the gateway and the operator: let the rollouts finish.
for d in $(k -n "$NS" get deployments -o name); do
  k -n "$NS" rollout status "$d" --timeout=180s >&2 || die "$d did not finish rolling out"
done
for d in $(k -n "$RNS" get deployments -o name); do
  k -n "$RNS" rollout status "$d" --timeout=180s >&2 || die "$d did not finish rolling out"
done
log "ok: $(k -n "$NS" get agents -o name | wc -l) Agents Ready, banking-tools available"
# A plain request to the tool server, with no identity assertion, reads no balance.
k -n "$NS" port-forward deployment/banking-tools 28090:8080 >/dev/null 2>&1 &
FORWARD_PID=$!
deadline=$((SECONDS + 30))
until plain="$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"accountNumber":"12345678"}' http://127.0.0.1:28090/balance 2>/dev/null)" && [ "$plain" != 000 ]; do
  [ "$SECONDS" -lt "$deadline" ] || { kill "$FORWARD_PID" 2>/dev/null; die "no port-forward to banking-tools"; }
  sleep 1
done
kill "$FORWARD_PID" 2>/dev/null || true
[ "$plain" = 401 ] || die "banking-tools answered a balance request without an identity assertion with $plain, not 401"
log "ok: banking-tools refuses a request without the gateway's identity assertion (401)"

dir="${SWITCHBOARD_PROFILE:-dev}"; [ "$dir" = dev ] && dir=debug; [ "$dir" = shipping ] && dir=release-dataplane
CHAT="${CARGO_TARGET_DIR:-$ROOT/target}/$dir/switchboard"
# The routing table names the Agents by namespace: ask for this test's triage.
out="$( (sleep 5) | timeout 30 "$CHAT" chat "$URL/v1/session?agent=$NS/triage" 2>&1 || true)"
echo "$out" | grep -q "connected to triage, session gw-" || die "no gateway session with triage: $out"
echo "$out" | grep -q "Example Bank" || die "no greeting from the triage pod: $out"
log "ok: through the gateway ($URL) to a triage pod: $(echo "$out" | grep -m1 '^<')"
# The operator's NetworkPolicy (runtime pods take traffic only from the gateway) is applied in
# every namespace with Agents. This node's bridge network does not enforce NetworkPolicy, so
# what it blocks is not tested here.
k -n "$NS" get networkpolicy switchboard-agent-ingress -o name >/dev/null || die "the operator's NetworkPolicy is not applied in $NS"
log "ok: NetworkPolicy applied in $NS (not enforced by this node's bridge network)"

# Conversations on real pods.
log "conversations on real pods (switchboard-dataplane's pods tests)"
export SWITCHBOARD_E2E_GATEWAY="$URL" SWITCHBOARD_E2E_NAMESPACE="$NS" SWITCHBOARD_E2E_RELEASE_NAMESPACE="$RNS" \
  SWITCHBOARD_E2E_SIM_LISTEN="$NODE_IP:$SIM_PORT" SWITCHBOARD_E2E_SIM_CERT="$PKI/sim.pem" \
  SWITCHBOARD_E2E_SIM_KEY="$PKI/sim.key" SWITCHBOARD_E2E_KUBECTL="$BIN/kubectl" \
  SWITCHBOARD_E2E_QUOTA_POOL="$QUOTA_POOL"
# The workspace's build (as the tests stage made it), only the pods binary, one at a time.
if cargo nextest --version >/dev/null 2>&1; then
  (cd "$ROOT" && cargo nextest run --workspace --locked --run-ignored only -E 'binary(pods)' -j 1 >&2) \
    || { k -n "$NS" get pods -o wide >&2; die "conversations on real pods failed"; }
else
  (cd "$ROOT" && cargo test --locked -p switchboard-dataplane --test pods -- --ignored --test-threads 1 >&2) \
    || { k -n "$NS" get pods -o wide >&2; die "conversations on real pods failed"; }
fi
log "ok: conversations on real pods"

# A phone call through the chart's SIP edge (sip.enabled, on the node's network): Debian's
# baresip on this machine dials triage's number at the node's address; the edge pod takes
# it, opens a session at the gateway's Service for the Agent that claims the number, and the
# phone hears the triage pod's reply (the Bedrock simulator on this machine, which the pods
# call, hears the phone's 500 Hz tone as "phrase 1"). The phone hangs up at the end of its
# WAV; the edge logs the call answered and ended by the phone; the record has the session.
log "a phone call through the chart's SIP edge to $TRIAGE_NUMBER (triage)"
k -n "$RNS" wait --for=condition=Available deployment -l app.kubernetes.io/name=switchboard-sip --timeout=60s >&2 \
  || die "the SIP edge's Deployment is not available"
# The simulator: the workspace's build of `switchboard` has it, the image's build (which
# image.sh left in its place) does not; built again here only when it is missing.
"$CHAT" sim --help >/dev/null 2>&1 || (cd "$ROOT" && cargo build --locked --profile "${SWITCHBOARD_PROFILE:-dev}" \
  -p switchboard-dataplane --bin switchboard >&2) || die "cannot build switchboard with its simulator"
"$CHAT" sim --listen "$NODE_IP:$SIM_PORT" --tls-cert "$PKI/sim.pem" --tls-key "$PKI/sim.key" \
  >"$DIR/e2e-sim.log" 2>&1 &
SIM_PID=$!
triage_sessions() { "$CHAT" sessions --record-database-url "$RECORD_URL" list --since 1h --agent "$NS/triage" --limit 200 --json \
  | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
before="$(triage_sessions)" || die "cannot read the record"
rm -rf "$PHONE_DIR" && mkdir -p "$PHONE_DIR"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/lead.wav" trim 0 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/tone.wav" synth 1.5 sine 500 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/tail.wav" trim 0 9
"$BIN/sox" "$PHONE_DIR/lead.wav" "$PHONE_DIR/tone.wav" "$PHONE_DIR/tail.wav" "$PHONE_DIR/say.wav"
# baresip takes its port and the next (TLS): two free ports.
phone_port="$(python3 -c 'import socket
for p in range(26100, 26200, 2):
    try:
        for q in (p, p + 1):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind); s.bind(("'"$NODE_IP"'", q)); s.close()
        print(p); break
    except OSError: pass')"
[ -n "$phone_port" ] || die "no free port pair for the phone"
# dial SECONDS [AT]: baresip calls triage's number at AT (default: the edge on the node's
# network), playing say.wav; over when the call ends (or is refused), or after SECONDS. The
# phone is on this machine's network at the node's address, or where PHONE_IP and PHONE_IN
# (a command prefix: a network namespace) put it.
PHONE_IP="$NODE_IP"
PHONE_IN=()
dial() {
  local at="${2:-$NODE_IP:$SIP_PORT}"
  rm -rf "$PHONE_DIR/snd" && mkdir -p "$PHONE_DIR/snd"
  cat >"$PHONE_DIR/config" <<CFG
sip_listen $PHONE_IP:$phone_port
module_path /usr/lib/baresip/modules
module stdio.so
module g711.so
module aufile.so
module sndfile.so
module account.so
module menu.so
audio_source aufile,$PHONE_DIR/say.wav
audio_player aufile,$PHONE_DIR/play.wav
audio_alert aufile,$PHONE_DIR/say.wav
snd_path $PHONE_DIR/snd
CFG
  echo "<sip:caller@$PHONE_IP:$phone_port;transport=udp>;regint=0;audio_codecs=PCMU" \
    >"$PHONE_DIR/accounts"
  "${PHONE_IN[@]}" "$BIN/baresip" -f "$PHONE_DIR" -e "/dial sip:$TRIAGE_NUMBER@$at;transport=udp" -t "$1" \
    </dev/null >"$PHONE_DIR/baresip.log" 2>&1 &
  local phone_pid=$! deadline=$((SECONDS + $1))
  # -s: the background job may not have opened its log yet.
  until grep -qs "terminated\|session closed" "$PHONE_DIR/baresip.log"; do
    [ "$SECONDS" -lt "$deadline" ] && kill -0 "$phone_pid" 2>/dev/null || break
    sleep 0.5
  done
  sleep 0.5
  kill "$phone_pid" 2>/dev/null || true; wait "$phone_pid" 2>/dev/null || true
}
sip_logs() { k -n "$RNS" logs -l app.kubernetes.io/name=switchboard-sip --tail=200 2>&1 || true; }
# heard: the last call was answered, the phone heard the agent (sets rms and length), and
# the edge logged it answered and ended by the phone's BYE.
heard() {
  grep -q "Call established" "$PHONE_DIR/baresip.log" \
    || die "the call was not answered: $(cat "$PHONE_DIR/baresip.log") -- the SIP edge: $(sip_logs)"
  local dec stat edge_log
  dec="$(ls "$PHONE_DIR"/snd/*-dec.wav 2>/dev/null | head -n1)"
  [ -n "$dec" ] || die "the phone recorded nothing: $(cat "$PHONE_DIR/baresip.log")"
  stat="$("$BIN/sox" "$dec" -n stat 2>&1)"
  rms="$(echo "$stat" | sed -n 's/^RMS *amplitude: *//p')"
  length="$(echo "$stat" | sed -n 's/^Length (seconds): *//p')"
  python3 -c "import sys; sys.exit(0 if float('$rms') > 0.01 else 1)" \
    || die "the phone heard silence (RMS $rms over $length s): $(sip_logs) -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
  edge_log="$(sip_logs)"
  echo "$edge_log" | grep -q "call answered" || die "the SIP edge logged no answered call: $edge_log"
  echo "$edge_log" | grep -q "RemoteHangUp" || die "the phone's BYE did not end the call at the edge: $edge_log"
}
dial 45
heard
kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
deadline=$((SECONDS + 20))
until after="$(triage_sessions)" && [ "$after" -gt "$before" ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the call's session is not in the record ($before triage sessions before, ${after:-?} after)"
  sleep 1
done
log "ok: a phone call through the chart's SIP edge pod reached a triage pod; heard RMS $rms over $length s; recorded"

# Every one of those sessions is in the record, through whichever gateway replica served it.
sessions() { "$CHAT" sessions --record-database-url "$RECORD_URL" "$@"; }
recorded="$(sessions list --since 1h --agent "$NS/banking" --limit 200)" || die "cannot read the record: $recorded"
echo "$recorded" | grep -q "$NS/triage -> $NS/idv -> $NS/banking" \
  || die "no recorded session from triage through idv to banking: $recorded"
id="$(echo "$recorded" | grep -m1 "$NS/triage -> $NS/idv -> $NS/banking" | awk '{print $1}')"
shown="$(sessions show "$id")" || die "cannot show $id: $shown"
echo "$shown" | grep -q "perform_idv_check" || die "the recorded session has no identity check: $shown"
if echo "$shown" | grep -q "12345678"; then die "an account number is in the record: $shown"; fi
log "ok: $(echo "$recorded" | tail -n +2 | wc -l) sessions through banking recorded in PostgreSQL; $id: $(echo "$shown" | sed -n 's/^agents *//p')"

# WebRTC through the chart's gateway on the node's network (gateway.webrtc.exposure
# hostNetwork, one replica): its UDP port and ICE-TCP port are the node's, advertised at the
# node's address (status.hostIP). The release is upgraded to it: a rollout that replaces the
# pod without surging (a second pod could not take the node's ports). An aiortc caller
# (tests/cluster/webrtc-call.py) offers through the gateway's Service, its media go to the
# node's UDP port, and it hears triage's pod. Then, with UDP to that port dropped on this
# machine (iptables), headless Chromium (dataplane/tests/webrtc/tcp.cjs) falls back to
# ICE-TCP: its selected candidate pair is TCP to the node's port, the caller's words reach
# the agent and its answers come back. Both calls are in the record.
WEBRTC_PORT="${SWITCHBOARD_E2E_WEBRTC_PORT:-23478}"
HTTP_URL="http://${URL#ws://}"
ORIGIN="${HTTP_URL%:80}"
log "the gateway's WebRTC edge on the node's network ($NODE_IP:$WEBRTC_PORT, UDP and ICE-TCP)"
"$BIN/helm" upgrade "$RELEASE" "$ROOT/charts/switchboard" --namespace "$RNS" --reuse-values \
  --set gateway.replicas=1 --set gateway.webrtc.enabled=true --set gateway.webrtc.exposure=hostNetwork \
  --set gateway.webrtc.udpPort="$WEBRTC_PORT" --set gateway.webrtc.tcpPort="$WEBRTC_PORT" \
  --set "gateway.allowedOrigins={$ORIGIN}" --wait --timeout 180s >&2 \
  || { k -n "$RNS" get pods -o wide >&2; die "the gateway did not roll onto the node's network"; }
# (Failed pods aside: one evicted earlier stays as an object, and is no gateway.)
gateway_pods() {
  k -n "$RNS" get pods -l app.kubernetes.io/name=switchboard-gateway --field-selector=status.phase!=Failed \
    -o jsonpath="$1"
}
deadline=$((SECONDS + 120))
until [ "$(gateway_pods '{range .items[*]}{.spec.hostNetwork}{" "}{.status.phase}{"\n"}{end}')" = "true Running" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { k -n "$RNS" get pods -o wide >&2; die "not one gateway pod on the node's network"; }
  sleep 2
done
gateway_logs() { k -n "$RNS" logs -l app.kubernetes.io/name=switchboard-gateway --tail=100 2>&1 || true; }
# The simulator's Example Bank script, hearing the 500 Hz tone (phrase 1) as the balance
# request that tcp.cjs waits for, and ending turns after 400 ms of silence.
{ cat "$ROOT/dataplane/sim/banking.yaml"
  printf 'sonic:\n  turnDetection: { silenceMs: { high: 400, medium: 400, low: 400 } }\n'
  printf '  phrases:\n    1: "I'"'"'d like to check my balance"\n'; } >"$DIR/e2e-webrtc-sim.yaml"
"$CHAT" sim --listen "$NODE_IP:$SIM_PORT" --tls-cert "$PKI/sim.pem" --tls-key "$PKI/sim.key" \
  --script "$DIR/e2e-webrtc-sim.yaml" >"$DIR/e2e-sim.log" 2>&1 &
SIM_PID=$!
before="$(triage_sessions)" || die "cannot read the record"
called="$("$BIN/aiortc-python" "$HERE/webrtc-call.py" "$HTTP_URL" "$NS/triage" "$PHONE_DIR/say.wav" \
  2>"$DIR/e2e-webrtc.err" | tail -n1)" \
  || die "the aiortc call failed: $called $(tail -n 5 "$DIR/e2e-webrtc.err") -- the gateway: $(gateway_logs)"
# aiortc_call PORT: webrtc-call.py's result ($called) checked: a UDP candidate at the node's
# address and PORT, triage's session, DELETE answered 200; prints the frames of reply audio
# heard above silence.
aiortc_call() {
  echo "$called" | NODE_IP="$NODE_IP" PORT="$1" python3 -c '
import json, os, sys
r = json.load(sys.stdin)
at = os.environ["NODE_IP"] + " " + os.environ["PORT"]
assert any(" udp " in c and at in c for c in r["candidates"]), "no UDP candidate at %s: %s" % (at, r["candidates"])
assert "triage" in r["agent"], r["agent"]
assert r["deleted"] == 200, r["deleted"]
print(r["audio"]["loud"])
'
}
heard="$(aiortc_call "$WEBRTC_PORT")" || die "the aiortc call: $called"
log "ok: an aiortc caller reached triage over WebRTC at the node's UDP port: $heard frames of reply audio heard"
"$BIN/sox" -n -r 16000 -c 1 -b 16 "$PHONE_DIR/tone16.wav" synth 1.5 sine 500 vol 0.5
"$BIN/sox" -n -r 16000 -c 1 -b 16 "$PHONE_DIR/quiet16.wav" trim 0 8
"$BIN/sox" "$PHONE_DIR/quiet16.wav" "$PHONE_DIR/tone16.wav" "$PHONE_DIR/quiet16.wav" "$PHONE_DIR/mic.wav"
UDP_DROP=(INPUT -p udp -d "$NODE_IP" --dport "$WEBRTC_PORT" -j DROP)
iptables -I "${UDP_DROP[@]}" || die "cannot drop UDP to $NODE_IP:$WEBRTC_PORT with iptables"
browsed="$(node "$ROOT/dataplane/tests/webrtc/tcp.cjs" "$BIN/../node_modules/playwright-core" "$HTTP_URL/" \
  "$PHONE_DIR/mic.wav" "$(command -v chromium)" "" "" "$NS/triage" 2>"$DIR/e2e-chromium.err" | tail -n1)" \
  || { iptables -D "${UDP_DROP[@]}"; die "the Chromium call failed: $(tail -n 20 "$DIR/e2e-chromium.err") -- the gateway: $(gateway_logs)"; }
iptables -D "${UDP_DROP[@]}"
echo "$browsed" | NODE_IP="$NODE_IP" PORT="$WEBRTC_PORT" python3 -c '
import json, os, sys
call = json.load(sys.stdin)["call"]
remote = call["selected"]["remote"]
assert remote["protocol"] == "tcp", "not over TCP: %s" % call["selected"]
assert (remote["address"], str(remote["port"])) == (os.environ["NODE_IP"], os.environ["PORT"]), remote
assert call["inbound"]["packets"] > 50 and call["deleted"] == 200, call
' || die "the Chromium call over ICE-TCP: $browsed"
log "ok: Chromium with UDP blocked reached triage over ICE-TCP at the node's TCP port $WEBRTC_PORT"
kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
deadline=$((SECONDS + 20))
until after="$(triage_sessions)" && [ "$after" -ge $((before + 2)) ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the WebRTC calls' sessions are not in the record ($before triage sessions before, ${after:-?} after)"
  sleep 1
done
log "ok: both WebRTC calls recorded"

# on_pod_network APP: waits until APP's one pod (failed ones aside) runs, on the pod
# network rather than the node's.
on_pod_network() {
  local deadline=$((SECONDS + 120))
  until [ "$(k -n "$RNS" get pods -l app.kubernetes.io/name="$1" --field-selector=status.phase!=Failed \
    -o jsonpath='{range .items[*]}{.spec.hostNetwork}{" "}{.status.phase}{"\n"}{end}')" = " Running" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { k -n "$RNS" get pods -o wide >&2; die "not one $1 pod on the pod network"; }
    sleep 2
  done
}
# load_balanced APP: writes the node's address into the status of APP's one Service of type
# LoadBalancer, as a load balancer's controller would.
load_balanced() {
  local svc
  svc="$(k -n "$RNS" get svc -l app.kubernetes.io/name="$1" \
    -o jsonpath='{range .items[?(@.spec.type=="LoadBalancer")]}{.metadata.name}{"\n"}{end}')"
  [ "$(echo "$svc" | wc -w)" = 1 ] || die "not one LoadBalancer Service of $1: $svc"
  k -n "$RNS" patch svc "$svc" --subresource=status --type=merge \
    -p "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$NODE_IP\"}]}}}" >/dev/null \
    || die "cannot write $svc's load balancer status"
}
# The same edge behind the chart's other exposure, a UDP Service of type LoadBalancer
# (gateway.webrtc.exposure loadBalancer, tcpPort 0: Kubernetes 1.20 takes no Service mixing
# UDP and TCP). No load balancer runs here, so the test does what a load balancer's
# controller does (MetalLB, a cloud's): it writes the Service's status.loadBalancer.ingress,
# an address of its own (the node's), and the real kube-proxy forwards that address's UDP
# port to the gateway pod. The chart is told the address (`advertise`) as its values say, the
# pod is on the pod network, and an aiortc caller reaches triage at the load balancer's
# address and port, not the pod's.
WEBRTC_LB_PORT="${SWITCHBOARD_E2E_WEBRTC_LB_PORT:-23479}"
log "the gateway's WebRTC edge behind a UDP LoadBalancer Service ($NODE_IP:$WEBRTC_LB_PORT)"
"$BIN/helm" upgrade "$RELEASE" "$ROOT/charts/switchboard" --namespace "$RNS" --reuse-values \
  --set gateway.webrtc.exposure=loadBalancer --set gateway.webrtc.udpPort="$WEBRTC_LB_PORT" \
  --set gateway.webrtc.tcpPort=0 --set gateway.webrtc.advertise="$NODE_IP" --wait --timeout 180s >&2 \
  || { k -n "$RNS" get pods,svc -o wide >&2; die "the gateway did not roll behind the LoadBalancer Service"; }
on_pod_network switchboard-gateway
load_balanced switchboard-gateway
"$CHAT" sim --listen "$NODE_IP:$SIM_PORT" --tls-cert "$PKI/sim.pem" --tls-key "$PKI/sim.key" \
  --script "$DIR/e2e-webrtc-sim.yaml" >"$DIR/e2e-sim.log" 2>&1 &
SIM_PID=$!
# kube-proxy programs the address within its sync period: the first calls may find no rule.
deadline=$((SECONDS + 60))
until called="$("$BIN/aiortc-python" "$HERE/webrtc-call.py" "$HTTP_URL" "$NS/triage" "$PHONE_DIR/say.wav" \
  2>"$DIR/e2e-webrtc.err" | tail -n1)"; do
  [ "$SECONDS" -lt "$deadline" ] \
    || die "the aiortc call through the LoadBalancer failed: $called $(tail -n 5 "$DIR/e2e-webrtc.err") -- the gateway: $(gateway_logs)"
  sleep 5
done
heard="$(aiortc_call "$WEBRTC_LB_PORT")" && [ "$heard" -gt 0 ] \
  || die "the aiortc call through the LoadBalancer (at the load balancer's address, reply audio heard): $called"
log "ok: an aiortc caller reached triage through the LoadBalancer Service at $NODE_IP:$WEBRTC_LB_PORT: $heard frames of reply audio heard"
kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""

# The SIP edge behind the chart's other exposure, a Service of type LoadBalancer
# (sip.exposure loadBalancer; UDP only, sip.tcp false: Kubernetes 1.20 takes no Service
# mixing UDP and TCP) carrying the SIP port and every RTP port, externalTrafficPolicy Local.
# As for WebRTC above, the test writes the Service's status.loadBalancer.ingress (the node's
# address) and the real kube-proxy forwards it. The phone is a caller from outside: in a
# network namespace of its own behind a veth pair (from this machine's own network its
# packets to the node's address would be masqueraded to the node's, and the edge would see
# the node, not the phone). The edge now takes calls from one trunk only, the phone's
# subnet: a call is answered only if the edge sees the phone's own address, which the load
# balancer keeps. The phone's RTP must reach the pod and the pod's come back through the
# load balancer's address, which the edge advertises in its SDP: the phone hears triage.
SIP_LB_PORT="${SWITCHBOARD_E2E_SIP_LB_PORT:-25070}"
SIP_LB_RTP_FIRST="${SWITCHBOARD_E2E_SIP_LB_RTP_FIRST:-25300}"
log "the SIP edge behind a UDP LoadBalancer Service ($NODE_IP:$SIP_LB_PORT), a caller from $PHONE_NET.2"
"$BIN/helm" upgrade "$RELEASE" "$ROOT/charts/switchboard" --namespace "$RNS" --reuse-values \
  --set sip.exposure=loadBalancer --set sip.tcp=false --set sip.port="$SIP_LB_PORT" \
  --set sip.advertise="$NODE_IP" --set sip.rtpPorts.first="$SIP_LB_RTP_FIRST" \
  --set sip.rtpPorts.last="$((SIP_LB_RTP_FIRST + 19))" \
  --set "sip.trunks[0].name=outside" --set "sip.trunks[0].sources[0]=$PHONE_NET.0/30" \
  --wait --timeout 180s >&2 \
  || { k -n "$RNS" get pods,svc -o wide >&2; die "the SIP edge did not roll behind the LoadBalancer Service"; }
on_pod_network switchboard-sip
load_balanced switchboard-sip
[ "$(sysctl -n net.ipv4.ip_forward)" = 1 ] || die "this machine does not forward IPv4 (the real node should have turned it on)"
ip netns add "$PHONE_NETNS" || die "cannot add the network namespace $PHONE_NETNS"
ip link add "$PHONE_VETH" type veth peer name sbe2e-phone || die "cannot add a veth pair"
ip link set sbe2e-phone netns "$PHONE_NETNS"
ip addr add "$PHONE_NET.1/30" dev "$PHONE_VETH"
ip link set "$PHONE_VETH" up
ip netns exec "$PHONE_NETNS" ip addr add "$PHONE_NET.2/30" dev sbe2e-phone
ip netns exec "$PHONE_NETNS" ip link set sbe2e-phone up
ip netns exec "$PHONE_NETNS" ip link set lo up
ip netns exec "$PHONE_NETNS" ip route add default via "$PHONE_NET.1"
PHONE_IP="$PHONE_NET.2"
PHONE_IN=(ip netns exec "$PHONE_NETNS")
"$CHAT" sim --listen "$NODE_IP:$SIM_PORT" --tls-cert "$PKI/sim.pem" --tls-key "$PKI/sim.key" \
  >"$DIR/e2e-sim.log" 2>&1 &
SIM_PID=$!
before="$(triage_sessions)" || die "cannot read the record"
# kube-proxy programs the address within its sync period: a first call may find no rule
# (the phone's INVITE then goes unanswered; it gives up within its -t seconds).
deadline=$((SECONDS + 90))
until dial 45 "$NODE_IP:$SIP_LB_PORT" && grep -q "Call established" "$PHONE_DIR/baresip.log"; do
  [ "$SECONDS" -lt "$deadline" ] \
    || die "the call through the LoadBalancer was not answered: $(cat "$PHONE_DIR/baresip.log") -- the SIP edge: $(sip_logs)"
  # Refused (a 403 if the edge saw another address than the phone's): no use waiting.
  ! grep -q "Forbidden\|Not Found\|Not Acceptable" "$PHONE_DIR/baresip.log" \
    || die "the call through the LoadBalancer was refused: $(cat "$PHONE_DIR/baresip.log") -- the SIP edge: $(sip_logs)"
  sleep 5
done
heard
# The answer means the edge saw the phone's address: it takes calls from that trunk only.
sip_logs | grep -q 'calls are taken only from these trunks trunks=\["outside"\]' \
  || die "the SIP edge does not say it takes calls only from the trunk outside: $(sip_logs)"
kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; SIM_PID=""
deadline=$((SECONDS + 20))
until after="$(triage_sessions)" && [ "$after" -gt "$before" ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the call's session is not in the record ($before triage sessions before, ${after:-?} after)"
  sleep 1
done
log "ok: a caller from outside ($PHONE_IP, trunk outside) reached triage through the SIP edge's LoadBalancer at $NODE_IP:$SIP_LB_PORT; heard RMS $rms over $length s; recorded"
ip link del "$PHONE_VETH"; ip netns del "$PHONE_NETNS"
PHONE_IP="$NODE_IP"
PHONE_IN=()

# The operator runs as the chart's two pods and one of them holds the Lease. Its pod
# deleted, the other replica takes over and reconciles an Agent created after that.
lease_holder() { k -n "$RNS" get lease switchboard-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
leader=""
for pod in $(k -n "$RNS" get pods -l app.kubernetes.io/name=switchboard-operator -o jsonpath='{.items[*].metadata.name}'); do
  case "$(lease_holder)" in "$pod"*) leader="$pod" ;; esac
done
[ -n "$leader" ] || die "no operator pod holds the Lease (holder: $(lease_holder))"
log "ok: the operator pod $leader leads; deleting it"
k -n "$RNS" delete pod "$leader" --wait=false >/dev/null
deadline=$((SECONDS + 120))
until holder="$(lease_holder)" && [ -n "$holder" ] && case "$holder" in "$leader"*) false ;; *) true ;; esac; do
  [ "$SECONDS" -lt "$deadline" ] || die "no other operator replica took the Lease (holder: $holder)"
  sleep 2
done
log "ok: $holder took over"
# The disputes Agent of the example under another name (its Persona and Workflow exist).
awk 'BEGIN { RS = "---\n" } /\nkind: Agent\n/ { print }' "$ROOT/examples/banking/disputes.yaml" \
  | sed 's/^  name: disputes$/  name: disputes-after-failover/' | k -n "$NS" apply -f - >/dev/null
k -n "$NS" wait --for=condition=Ready agent/disputes-after-failover --timeout=180s >&2 \
  || { k -n "$NS" get agents,pods >&2; die "the new leader did not bring up an Agent created after the failover"; }
log "ok: an Agent created after the failover is Ready"
log "PASS"
