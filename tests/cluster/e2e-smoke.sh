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
# its reply heard; one across triage -> idv -> banking's pods, each agent heard in its voice;
# one whose gateway replica is deleted mid-call, resumed by the edge on the other replica
# (no hang-up, the next phrase answered, one session in the record); an account number
# typed on the phone's keypad into idv's verify_by_keypad, the caller verified by the tool
# server's pod and the keys nowhere in the record or the pods' logs; a caller put through
# to a person, warm (triage's advisor a second baresip on this machine that the edge dials:
# the caller on hold, the person briefed by triage, then each phone hearing the other, the
# transfer counted and recorded); a busy person (486) and one whose phone rings unanswered,
# each transfer coming back to triage, which tells the caller; and again with the edge behind a UDP LoadBalancer
# Service, from a caller
# in a network namespace of its own (an outside address, which the edge's trunk admits),
# then called by the edge (an outbound call placed at the gateway with a calls=place API
# key, the release given API keys and that phone as its outbound trunk), hearing triage,
# and once more answering as a voicemail, left triage's message after its beep;
# WebRTC calls to the gateway on the node's network (UDP and ICE-TCP; Chromium
# spoken through triage -> idv -> banking, across their pods) and then behind a UDP
# LoadBalancer Service; the operator's NetworkPolicy applied; the operator's leader pod
# deleted, the other replica taking over. The gateway records every session into a
# PostgreSQL on this machine (gateway.record): the conversations above are in it, with the
# Agents they went through, read back with `switchboard sessions`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { echo "[e2e-smoke] $(date +%T) $*" >&2; }
# On a failure the node's own logs come first: the kubelet's last pod-lifecycle and error
# lines (up.sh runs it at log level 2), containerd's last lines. A run once failed on two
# pods that stayed Terminating for minutes after a helm upgrade, past their 15 and 40 s grace
# periods, which no later run repeated and nothing kept a trace of.
die() {
  echo "-- kubelet (pods' lifecycle and errors, the last lines)" >&2
  grep "SyncLoop (\(ADD\|DELETE\|REMOVE\|KILL\)\|[Kk]ill\|^E[0-9]" "$DIR/kubelet.log" 2>/dev/null \
    | grep -v "perf_event cgroup path" | tail -n 50 >&2 || true
  echo "-- containerd (the last lines)" >&2
  tail -n 30 "$DIR/containerd.log" >&2 2>/dev/null || true
  log "FAIL: $*"
  exit 1
}

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
PEOPLE_PIDS=()
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
  [ "${#PEOPLE_PIDS[@]}" = 0 ] || kill "${PEOPLE_PIDS[@]}" 2>/dev/null || true
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
# would wait with NumberTaken. The merge patch replaces the lists of numbers and people too:
# triage's advisor, in place of the example's (a softphone on this machine's loopback, for
# local mode), is a phone of this test's at the node's address, `transfer: warm`, for the
# warm transfer below (the edge, on the node's network, dials it there); so are a cashier
# whose phone is busy and a manager whose phone rings unanswered (a transfer rings for 10 s).
TRIAGE_NUMBER="+4420794$(od -An -N4 -tu4 /dev/urandom | tr -d ' ' | tail -c 7)"
# Four phones' ports (baresip takes its port and the next): the advisor's, the cashier's,
# the manager's, and that of the phone that keeps the cashier's busy.
read -r PERSON_PORT CASHIER_PORT MANAGER_PORT OCCUPIER_PORT < <(python3 -c 'import socket, sys
free = []
for p in range(26200, 26300, 2):
    try:
        for q in (p, p + 1):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind); s.bind((sys.argv[1], q)); s.close()
        free.append(str(p))
    except OSError: pass
print(" ".join(free[:4]))' "$NODE_IP") || true
[ -n "$OCCUPIER_PORT" ] || die "no free ports for the people's phones"
PERSON_URI="sip:advisor@$NODE_IP:$PERSON_PORT"
person() { echo "{\"name\":\"$1\",\"address\":\"sip:$1@$NODE_IP:$2\",\"transfer\":\"warm\",\"description\":\"$3\"}"; }
PEOPLE="[$(person advisor "$PERSON_PORT" "A person at Example Bank, for a caller who asks for one."),$(
  person cashier "$CASHIER_PORT" "The branch cashier."),$(person manager "$MANAGER_PORT" "The branch manager.")]"
for agent in $(k -n "$NS" get agents -o name); do
  telephony=""
  [ "$agent" != agent.switchboard.dev/triage ] \
    || telephony=",\"telephony\":{\"numbers\":[\"$TRIAGE_NUMBER\"],\"people\":$PEOPLE,\"transferTimeoutSeconds\":10}"
  k -n "$NS" patch "$agent" --type merge \
    -p "{\"spec\":{\"credentials\":{\"secretRef\":{\"name\":\"bedrock-credentials\"}}$telephony}}" >/dev/null
done
k -n "$NS" get agent triage -o jsonpath='{.spec.telephony.numbers[0]}' | grep -qx "$TRIAGE_NUMBER" \
  || die "triage does not claim $TRIAGE_NUMBER"
k -n "$NS" get agent triage -o jsonpath='{.spec.telephony.people[0].address} {.spec.telephony.people[0].transfer}' \
  | grep -qx "$PERSON_URI warm" || die "triage's advisor is not $PERSON_URI, warm"
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
# sim_start [--script FILE]: the simulator on the node's address (SIM_PID), for the calls
# below; returns once it takes connections (a call placed before would find no model).
sim_start() {
  "$CHAT" sim --listen "$NODE_IP:$SIM_PORT" --tls-cert "$PKI/sim.pem" --tls-key "$PKI/sim.key" "$@" \
    >"$DIR/e2e-sim.log" 2>&1 &
  SIM_PID=$!
  local deadline=$((SECONDS + 30))
  until (exec 3<>"/dev/tcp/$NODE_IP/$SIM_PORT") 2>/dev/null; do
    kill -0 "$SIM_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] \
      || die "the simulator does not listen on $NODE_IP:$SIM_PORT: $(tail -n 20 "$DIR/e2e-sim.log")"
    sleep 0.2
  done
}
# sim_stop: the simulator sim_start started, stopped (before the next starts on its port).
sim_stop() {
  kill "$SIM_PID" 2>/dev/null || true
  wait "$SIM_PID" 2>/dev/null || true
  SIM_PID=""
}
sim_start
# recorded COUNT MIN WHAT: waits (20 s) until the record's COUNT (triage_sessions,
# banking_sessions) is at least MIN (AFTER: the count then); dies saying WHAT is missing.
recorded() {
  local deadline=$((SECONDS + 20))
  until AFTER="$("$1")" && [ "$AFTER" -ge "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "$3 (want $2 sessions, ${AFTER:-?} recorded)"
    sleep 1
  done
}
triage_sessions() { "$CHAT" sessions --record-database-url "$RECORD_URL" list --since 1h --agent "$NS/triage" --limit 200 --json \
  | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
before="$(triage_sessions)" || die "cannot read the record"
rm -rf "$PHONE_DIR" && mkdir -p "$PHONE_DIR"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/lead.wav" trim 0 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/tone.wav" synth 1.5 sine 500 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/tail.wav" trim 0 9
"$BIN/sox" "$PHONE_DIR/lead.wav" "$PHONE_DIR/tone.wav" "$PHONE_DIR/tail.wav" "$PHONE_DIR/say.wav"
# baresip takes its port and the next (TLS): two free ports; and one for its console on
# loopback (PHONE_CONSOLE, for the keys pressed below).
read -r phone_port PHONE_CONSOLE < <(python3 -c 'import socket
for p in range(26100, 26200, 3):
    try:
        for q, at in ((p, "'"$NODE_IP"'"), (p + 1, "'"$NODE_IP"'"), (p + 2, "127.0.0.1")):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind); s.bind((at, q)); s.close()
        print(p, p + 2); break
    except OSError: pass') || true
[ -n "$phone_port" ] || die "no free ports for the phone"
# dial SECONDS [AT]: baresip calls triage's number at AT (default: the edge on the node's
# network), playing say.wav (or PHONE_SAY); over when the call ends (or is refused), or after SECONDS. The
# phone is on this machine's network at the node's address, or where PHONE_IP and PHONE_IN
# (a command prefix: a network namespace) put it. With AT `answer` it dials nobody: it
# answers the first call to sip:callee@PHONE_IP:<its port> (an outbound call's callee).
PHONE_IP="$NODE_IP"
PHONE_IN=()
dial() {
  local user=caller answer="" command=(-e "/dial sip:$TRIAGE_NUMBER@${2:-$NODE_IP:$SIP_PORT};transport=udp")
  [ "${2:-}" != answer ] || { user=callee answer=";answermode=auto" command=(); }
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
audio_source aufile,${PHONE_SAY:-$PHONE_DIR/say.wav}
audio_player aufile,$PHONE_DIR/play.wav
audio_alert aufile,$PHONE_DIR/say.wav
snd_path $PHONE_DIR/snd
module cons.so
cons_listen 127.0.0.1:$PHONE_CONSOLE
CFG
  echo "<sip:$user@$PHONE_IP:$phone_port;transport=udp>;regint=0;audio_codecs=PCMU$answer" \
    >"$PHONE_DIR/accounts"
  "${PHONE_IN[@]}" "$BIN/baresip" -f "$PHONE_DIR" "${command[@]}" -t "$1" \
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
sim_stop
recorded triage_sessions "$((before + 1))" "the call's session is not in the record"
log "ok: a phone call through the chart's SIP edge pod reached a triage pod; heard RMS $rms over $length s; recorded"

# The whole journey by phone, across pods (tests/tests/sip_phone/journey.rs is the same call
# against local mode). The
# phone says three phrase tones, each well after the answer to the one before: 500 Hz "I'd
# like to check my balance" (triage hands over to idv), 600 Hz the caller's details (idv
# checks them on the tool server's pod), 700 Hz "My balance please" (idv hands over to
# banking, hybrid, which says the balance). The simulator speaks each voice id at its own
# pitch (dataplane/sim/src/sonic/voice.rs: tiffany 400 Hz, matthew 142.9 Hz, amy 285.7 Hz),
# so the phone's recording, 250 ms at a time, is triage's voice, then idv's, then banking's;
# the record gets one more session through triage -> idv -> banking.
log "a phone call through the chart's SIP edge: triage -> idv -> banking, each heard in its own voice"
{ cat "$ROOT/dataplane/sim/banking.yaml"; printf '\nsonic:\n  phrases:\n'
  printf '    1: "I'"'"'d like to check my balance"\n'
  printf '    2: "My name is Ada Lovelace, account 12345678, sort code 12-34-56"\n'
  printf '    3: "My balance please"\n'; } >"$DIR/e2e-journey-sim.yaml"
sim_start --script "$DIR/e2e-journey-sim.yaml"
banking_sessions() { "$CHAT" sessions --record-database-url "$RECORD_URL" list --since 1h --agent "$NS/banking" --limit 200 --json \
  | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
before="$(banking_sessions)" || die "cannot read the record"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/j-lead.wav" trim 0 10
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/j-1.wav" synth 1.5 sine 500 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/j-2.wav" synth 2 sine 600 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/j-3.wav" synth 2 sine 700 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/j-gap.wav" trim 0 26
"$BIN/sox" "$PHONE_DIR/j-lead.wav" "$PHONE_DIR/j-1.wav" "$PHONE_DIR/j-gap.wav" "$PHONE_DIR/j-2.wav" \
  "$PHONE_DIR/j-gap.wav" "$PHONE_DIR/j-3.wav" "$PHONE_DIR/j-gap.wav" "$PHONE_DIR/journey.wav"
PHONE_SAY="$PHONE_DIR/journey.wav" dial 150
heard
dec="$(ls "$PHONE_DIR"/snd/*-dec.wav | head -n1)"
"$BIN/sox" "$dec" -t raw -e signed-integer -b 16 -c 1 -r 8000 "$PHONE_DIR/journey.raw" \
  || die "cannot read the phone's recording $dec"
voices="$(python3 - "$PHONE_DIR/journey.raw" <<'PY'
import math, struct, sys
raw = open(sys.argv[1], "rb").read()
x = [s / 32768.0 for s in struct.unpack("<%dh" % (len(raw) // 2), raw[: len(raw) // 2 * 2])]
names, hz = "TMA", (400.0, 24000.0 / 168, 24000.0 / 84)
def strength(w, f):
    c = 2 * math.cos(2 * math.pi * f / 8000)
    s1 = s2 = 0.0
    for v in w:
        s1, s2 = v + c * s1 - s2, s1
    return 2 * math.sqrt(max(s1 * s1 + s2 * s2 - c * s1 * s2, 0.0)) / len(w)
line = ""
for i in range(0, len(x) - 1999, 2000):
    a = [strength(x[i:i + 2000], f) for f in hz]
    b = max(range(3), key=lambda k: a[k])
    line += names[b] if a[b] >= 0.04 and all(a[b] >= 3 * a[k] for k in range(3) if k != b) else "."
runs, order = [], []
for c in line:
    if runs and runs[-1][0] == c: runs[-1][1] += 1
    else: runs.append([c, 1])
for c, n in runs:
    if c != "." and n >= 2 and (not order or order[-1] != c): order.append(c)
print("".join(order), line)
PY
)" || die "cannot analyse the phone's recording"
[ "${voices%% *}" = "TMA" ] \
  || die "the phone did not hear triage (T, 400 Hz), then idv (M), then banking (A), each in its own voice: ${voices#* } -- the SIP edge: $(sip_logs) -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
sim_stop
recorded banking_sessions "$((before + 1))" "the phone's journey is not in the record through banking"
log "ok: a phone call went triage -> idv -> banking across pods, each agent heard in its own voice: ${voices#* }"

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

# The phone steps below act during a call: call_start SECONDS runs dial in the background
# and returns once the phone has the call (CALL_FROM: when it was dialled, for the pods'
# logs since then); call_over waits for its end. logs_since NAMESPACE SELECTOR: those pods'
# logs since then.
call_start() {
  rm -f "$PHONE_DIR/baresip.log"
  CALL_FROM="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  dial "$@" &
  CALL_PID=$!
  local deadline=$((SECONDS + 30))
  until grep -qs "Call established" "$PHONE_DIR/baresip.log"; do
    kill -0 "$CALL_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] \
      || die "the call was not answered: $(cat "$PHONE_DIR/baresip.log" 2>/dev/null) -- the SIP edge: $(sip_logs)"
    sleep 0.2
  done
  CALL_AT=$SECONDS
}
call_over() { wait "$CALL_PID" 2>/dev/null || true; }
logs_since() {
  k -n "$1" logs -l "$2" --since-time="$CALL_FROM" --tail=-1 --max-log-requests=20 --prefix 2>&1 || true
}
edge_since() { logs_since "$RNS" app.kubernetes.io/name=switchboard-sip; }
# call_session: the session the edge opened for the call (its `call answered` line).
call_session() { edge_since | sed -n 's/.*call answered.* session=\([^ ]*\).*/\1/p' | head -n1; }
# heard_from SECONDS: the RMS of what the phone heard from SECONDS into the call on.
heard_from() {
  "$BIN/sox" "$(ls "$PHONE_DIR"/snd/*-dec.wav | head -n1)" -n trim "$1" stat 2>&1 | sed -n 's/^RMS *amplitude: *//p'
}
# (Failed pods aside: one evicted earlier stays as an object, and is no gateway.)
gateway_pods() {
  k -n "$RNS" get pods -l app.kubernetes.io/name=switchboard-gateway --field-selector=status.phase!=Failed \
    -o jsonpath="$1"
}
gateway_logs() { k -n "$RNS" logs -l app.kubernetes.io/name=switchboard-gateway --tail=100 2>&1 || true; }

# A phone call survives its gateway replica going away (dataplane/sip-edge/src/gateway/
# resume.rs; tests/tests/sip_phone/resume.rs is the same call against local mode, its
# connection cut by a relay). The phone says phrase 1 (500 Hz), and phrase 2 (600 Hz) 16 s
# later. Between them the test deletes the gateway pod that holds the call's session (the
# one replica whose /metrics counts a live session): it parks the session in Redis and
# closes the edge's connection, and the edge resumes the session through the gateway's
# Service, on the other replica. The phone is never hung up on (its own BYE ends the call,
# at the end of its WAV), hears the agent answer phrase 2, and the record has one session
# for the call, with both phrases.
log "a phone call whose gateway replica is deleted mid-call"
sim_start
before="$(triage_sessions)" || die "cannot read the record"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/r-gap.wav" trim 0 16
"$BIN/sox" "$PHONE_DIR/lead.wav" "$PHONE_DIR/tone.wav" "$PHONE_DIR/r-gap.wav" "$PHONE_DIR/j-2.wav" \
  "$PHONE_DIR/tail.wav" "$PHONE_DIR/resume.wav"
PHONE_SAY="$PHONE_DIR/resume.wav" call_start 60
# The agent has answered phrase 1 (2 s in) well before phrase 2 (18 s in).
sleep 9
holder=""
for pod in $(gateway_pods '{range .items[*]}{.metadata.name}{"="}{.status.podIP}{"\n"}{end}'); do
  live="$(curl -sf "http://${pod#*=}:8080/metrics" | awk '/^switchboard_gateway_sessions_live\{/ { n += $2 } END { print n + 0 }')"
  [ "${live:-0}" = 0 ] || holder="$holder ${pod%=*}"
done
[ "$(echo "$holder" | wc -w)" = 1 ] || die "not one gateway replica holds the call's session (live sessions on:$holder)"
holder="${holder# }"
k -n "$RNS" delete pod "$holder" --wait=false >/dev/null
deadline=$((SECONDS + 20))
until grep -q "the call's session is resumed" <<<"$(edge_since)"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the edge did not resume the call's session: $(edge_since) -- the gateway: $(gateway_logs)"
  sleep 0.5
done
! grep -q "terminated\|session closed" "$PHONE_DIR/baresip.log" \
  || die "the phone was hung up on when its gateway replica went away: $(cat "$PHONE_DIR/baresip.log") -- the SIP edge: $(edge_since)"
resumed_in=$((SECONDS - CALL_AT))
call_over
lasted=$((SECONDS - CALL_AT))
edge_log="$(edge_since)"
grep -q "the connection to the gateway ended mid-call: resuming the session" <<<"$edge_log" \
  || die "the edge did not say why it resumed: $edge_log"
grep -q 'end="the phone side: RemoteHangUp"' <<<"$edge_log" || die "the phone's BYE did not end the call: $edge_log"
! grep -q "could not be resumed" <<<"$edge_log" || die "$edge_log"
[ "$lasted" -ge 24 ] || die "the call did not go on to the end of the phone's WAV (29 s): $lasted s -- $edge_log"
rms="$(heard_from 20.5)"
python3 -c "import sys; sys.exit(0 if float('${rms:-0}') > 0.01 else 1)" \
  || die "the phone did not hear the agent answer phrase 2 (RMS ${rms:-?} from 20.5 s on) -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
grep -q '^switchboard_sip_gateway_resumes_total{outcome="resumed"} [1-9]' <<<"$(curl -sf "http://$NODE_IP:9060/metrics")" \
  || die "the edge's /metrics counts no resumed session"
sim_stop
id="$(call_session)"
[ -n "$id" ] || die "the edge named no session for the call: $edge_log"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && [ "$(grep -c ' user .*phrase [12]' <<<"$shown")" = 2 ] \
  && awk '/ user .*phrase 2/ { p = 1; next } p && / assistant / { f = 1 } END { exit !f }' <<<"$shown"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the record's $id does not hold both phrases and the answer to the second: $shown"
  sleep 1
done
after="$(triage_sessions)" || die "cannot read the record"
[ "$after" = $((before + 1)) ] || die "one session for the call in the record, resumed: $before triage sessions before, $after after"
log "ok: a phone call survived its gateway replica $holder being deleted: resumed $resumed_in s in, went on for $lasted s, the answer to the phrase after it heard (RMS $rms); one session ($id) with both phrases"
# Both replicas again, the deleted one gone, before the next call.
deadline=$((SECONDS + 120))
until [ "$(gateway_pods '{range .items[*]}{.status.containerStatuses[0].ready}{"\n"}{end}')" = "$(printf 'true\ntrue')" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { k -n "$RNS" get pods -o wide >&2; die "the gateway did not come back to two ready replicas"; }
  sleep 2
done

# Keys on the phone: idv's verify_by_keypad (examples/banking/idv.yaml;
# tests/tests/sip_phone/keypad.rs is the same against local mode) takes the caller's name
# and sort code from the model and the account number from the keys typed. The phone says
# phrase 1 (triage hands over to idv), then phrase 2, Alan Turing's name and sort code and
# that he will type his account number (idv calls verify_by_keypad, which waits for the
# keypad); once the idv pod logs the wait, the phone types 87654321# (RFC 4733 events
# through baresip's console). The demo tool server's pod verifies him, and idv says so.
# The account number, never said in this run, is nowhere in the record (read back with
# `switchboard sessions show`, and the database's whole dump), nor in the logs of the edge,
# the gateway replicas or the Agents' runtime pods since the call began.
KEYED=87654321
log "keys typed on the phone through the chart's SIP edge into idv's verify_by_keypad"
{ cat "$ROOT/dataplane/sim/banking.yaml"; printf '\nsonic:\n  phrases:\n'
  printf '    1: "I'"'"'d like to check my balance"\n'
  printf '    2: "My name is Alan Turing, sort code 65-43-21, and I'"'"'ll type my account number on the keypad"\n'
} >"$DIR/e2e-keypad-sim.yaml"
sim_start --script "$DIR/e2e-keypad-sim.yaml"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/k-tail.wav" trim 0 25
"$BIN/sox" "$PHONE_DIR/j-lead.wav" "$PHONE_DIR/j-1.wav" "$PHONE_DIR/j-gap.wav" "$PHONE_DIR/j-2.wav" \
  "$PHONE_DIR/k-tail.wav" "$PHONE_DIR/keypad.wav"
PHONE_SAY="$PHONE_DIR/keypad.wav" call_start 100
runtime_logs() { logs_since "$NS" switchboard.dev/agent; }
deadline=$((SECONDS + 70))
until [ "$(runtime_logs | grep "keypad input" | grep -c waiting)" -gt 0 ]; do
  [ "$SECONDS" -lt "$deadline" ] \
    || die "idv's verify_by_keypad did not wait for the keypad: $(runtime_logs | tail -n 30) -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
  sleep 0.5
done
echo "/sndcode $KEYED#" >"/dev/udp/127.0.0.1/$PHONE_CONSOLE"
deadline=$((SECONDS + 20))
until [ "$(runtime_logs | grep "keypad input" | grep -c collected)" -gt 0 ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the keys typed did not fill the tool's input: $(runtime_logs | tail -n 30) -- the SIP edge: $(edge_since)"
  sleep 0.5
done
call_over
sim_stop
edge_log="$(edge_since)"
grep -q ' keys=9 ' <<<"$edge_log" || die "the edge did not forward the 9 keys pressed once each: $edge_log"
id="$(call_session)"
[ -n "$id" ] || die "the edge named no session for the call: $edge_log"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && grep -q 'tool_complete *verify_by_keypad -> .*"verified": *true' <<<"$shown" \
  && grep -q "you're verified" <<<"$shown"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the record's $id has no verify_by_keypad that verified the caller, nor idv saying so: $shown"
  sleep 1
done
! grep -q "The caller pressed" <<<"$shown" || die "the keys were told to the model: $shown"
# The database, but for the table of what a session needs to be continued later: that
# holds the session's memory unredacted by design (dataplane/record/src/store/mod.rs), here
# the verified caller as the tool server answered, whose account number banking's tools
# bind. Of this session's row, that answer is all that may hold the number: it proves the
# keys reached the tool server (which named the account they typed), and the rest of the
# state (the turns, the typed inputs) holds no trace of them.
pg_bin="$(dirname "$(readlink -f "$BIN/initdb")")"
dump="$(PGPASSWORD="$PG_PASSWORD" "$pg_bin/pg_dump" --data-only --exclude-table-data=switchboard_session_continuation \
  -h "$NODE_IP" -p "$PG_PORT" -U switchboard postgres)" || die "cannot dump the record's database"
kept="$(PGPASSWORD="$PG_PASSWORD" "$pg_bin/psql" -At -h "$NODE_IP" -p "$PG_PORT" -U switchboard postgres \
  -c "SELECT state FROM switchboard_session_continuation WHERE session_id = '$id'")" || die "cannot read $id's state"
KEYED="$KEYED" python3 -c '
import json, os, sys
text = sys.stdin.read()
state = json.loads(text[text.index("{"):])
memory = state["kept"]["memory"]
verified = memory.pop("verifiedUser")
keyed = os.environ["KEYED"]
assert verified["accountNumber"] == keyed and verified["name"] == "Alan Turing", verified
rest = json.dumps(state)
assert keyed not in rest and " ".join(keyed) not in rest, "the state holds the keys beyond the tool server'"'"'s answer: %s" % rest
' <<<"$kept" || die "$id's continuation state: $kept"
spaced="$(echo "$KEYED" | sed 's/./& /g; s/ $//')"
for form in "$KEYED" "$spaced"; do
  for what in "the record's $id" "the record's database" "the SIP edge's log" "the gateway's log" "the runtime pods' log"; do
    case "$what" in
      "the record's $id") text="$shown" ;;
      "the record's database") text="$dump" ;;
      "the SIP edge's log") text="$edge_log" ;;
      "the gateway's log") text="$(logs_since "$RNS" app.kubernetes.io/name=switchboard-gateway)" ;;
      *) text="$(runtime_logs)" ;;
    esac
    ! grep -qF -- "$form" <<<"$text" || die "$what holds the keys typed ($form): $(grep -F -- "$form" <<<"$text" | head -n 5)"
  done
done
log "ok: $KEYED# typed on the phone reached idv's verify_by_keypad on its pod, and the tool server verified the caller; the keys are nowhere in the record ($id), its database, or the edge's, gateway's and runtime pods' logs"

# A caller put through to a person, warm (tests/tests/sip_phone/warm.rs is the same against
# local mode). Triage's advisor (patched above: `transfer: warm`, at PERSON_URI) is a second
# baresip on this machine at the node's address, answering by itself and taking only A-law;
# the edge, on the node's network, dials it there. The caller asks for the advisor (phrase
# 1) and triage calls transfer_to_person; the edge holds the caller (its hold chime) and
# dials the person, who hears triage brief them (its voice, 400 Hz), then the caller
# (950 Hz, μ-law transcoded to A-law); the caller hears the chime, then the person
# (1150 Hz). The caller hangs up at the end of its WAV, which hangs the person up; the
# edge's /metrics counts the transfer `transferred`, and the record's session ends
# transferred to the advisor, warm, with the brief.
log "a caller put through to a person: a warm transfer to triage's advisor at $PERSON_URI"
BRIEF="Ada Lovelace is calling about a card payment she does not know."
# transfer_sim NAME STATUS REPLY PERSON...: the simulator (sim_start) on the Example Bank's
# script with two rules before those for a caller's words (after those for summaries and
# analyses): "put me through to the <who>" calls transfer_to_person for <who>, and its
# result of STATUS (success, error) is answered with REPLY; phrase n (400 + 100 n Hz) asks
# for the n-th PERSON.
transfer_sim() {
  local name="$1" status="$2" reply="$3" n=0 script="$DIR/e2e-$1-sim.yaml"
  shift 3
  cat >"$DIR/e2e-$name-rules.yaml" <<YAML
  - name: e2e-put-through
    when: { userText: "(?i)through to the (?P<who>[a-z]+)" }
    reply: { toolUse: { name: transfer_to_person, input: { person: "{who}", reason: "the caller asked" } } }
  - name: e2e-$name
    when: { toolResult: { name: transfer_to_person, status: $status } }
    reply: { text: "$reply" }
YAML
  { awk -v rules="$DIR/e2e-$name-rules.yaml" '/^  - name: greeting$/ { while ((getline l < rules) > 0) print l } { print }' \
      "$ROOT/dataplane/sim/banking.yaml"
    printf '\nsonic:\n  phrases:\n'
    for who in "$@"; do n=$((n + 1)); printf '    %d: "Put me through to the %s please"\n' "$n" "$who"; done; } >"$script"
  grep -q "e2e-$name" "$script" || die "the $name transfer's rules are not in the simulator's script"
  sim_start --script "$script"
}
transfer_sim warm success "$BRIEF" advisor
# The person: silent for 14 s after answering (the brief, the bridge), then its tone.
PERSON_DIR="$PHONE_DIR/advisor"
rm -rf "$PERSON_DIR" && mkdir -p "$PERSON_DIR/snd"
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PERSON_DIR/lead.wav" trim 0 14
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PERSON_DIR/tone.wav" synth 12 sine 1150 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PERSON_DIR/tail.wav" trim 0 20
"$BIN/sox" "$PERSON_DIR/lead.wav" "$PERSON_DIR/tone.wav" "$PERSON_DIR/tail.wav" "$PERSON_DIR/person.wav"
# person_phone NAME PORT ACCOUNT SAYS [BARESIP ARGUMENTS]: a baresip of a person's on this
# machine as sip:NAME@<the node's address>:PORT, its folder $PHONE_DIR/NAME (what it hears
# in snd/, its log baresip.log), with ACCOUNT's parameters (answermode, codecs) and saying
# the WAV SAYS; returns once it is ready, its pid among PEOPLE_PIDS (ended by people_gone).
person_phone() {
  local name="$1" port="$2" account="$3" says="$4" folder="$PHONE_DIR/$1" deadline=$((SECONDS + 20))
  shift 4
  mkdir -p "$folder/snd"
  cat >"$folder/config" <<CFG
sip_listen $NODE_IP:$port
module_path /usr/lib/baresip/modules
module stdio.so
module g711.so
module aufile.so
module sndfile.so
module account.so
module menu.so
audio_source aufile,$says
audio_player aufile,$folder/play.wav
audio_alert aufile,$folder/alert.wav
snd_path $folder/snd
call_max_calls 1
CFG
  echo "<sip:$name@$NODE_IP:$port;transport=udp>;regint=0;$account" >"$folder/accounts"
  "$BIN/baresip" -f "$folder" "$@" </dev/null >"$folder/baresip.log" 2>&1 &
  PEOPLE_PIDS+=($!)
  until grep -qs "baresip is ready" "$folder/baresip.log"; do
    kill -0 "${PEOPLE_PIDS[-1]}" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ] \
      || die "$name's phone did not start: $(cat "$folder/baresip.log" 2>/dev/null)"
    sleep 0.2
  done
}
people_gone() {
  kill "${PEOPLE_PIDS[@]}" 2>/dev/null || true; wait "${PEOPLE_PIDS[@]}" 2>/dev/null || true; PEOPLE_PIDS=()
}
person_phone advisor "$PERSON_PORT" "audio_codecs=PCMA;answermode=auto" "$PERSON_DIR/person.wav" -t 90
# The caller: phrase 1, 16 s of silence (hold, brief), 8 s of its tone; then it hangs up.
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/w-gap.wav" trim 0 16
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/w-caller.wav" synth 8 sine 950 vol 0.5
"$BIN/sox" "$PHONE_DIR/lead.wav" "$PHONE_DIR/tone.wav" "$PHONE_DIR/w-gap.wav" "$PHONE_DIR/w-caller.wav" \
  "$PHONE_DIR/warm.wav"
PHONE_SAY="$PHONE_DIR/warm.wav" call_start 60
person_context() {
  echo "-- the SIP edge: $(edge_since) -- the person: $(cat "$PERSON_DIR/baresip.log") -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
}
deadline=$((SECONDS + 40))
until grep -q "the caller and the person are bridged" <<<"$(edge_since)"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the caller and the person were not bridged $(person_context)"
  sleep 0.5
done
bridged_in=$((SECONDS - CALL_AT))
call_over
deadline=$((SECONDS + 15))
until grep -q "bridge ended" <<<"$(edge_since)" && grep -q "terminated\|session closed" "$PERSON_DIR/baresip.log"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the caller's hang-up did not end the bridge and the person's call $(person_context)"
  sleep 0.5
done
people_gone
sim_stop
edge_log="$(edge_since)"
for said in "warm=true" "dialling the person" 'outcome="transferred"' "then the caller hung up"; do
  grep -qF -- "$said" <<<"$edge_log" || die "the edge did not log $said: $edge_log"
done
! grep -q "(REFER)" <<<"$edge_log" || die "a warm transfer dials, it does not REFER: $edge_log"
grep -q '^switchboard_sip_transfers_total{outcome="transferred"} [1-9]' <<<"$(curl -sf "http://$NODE_IP:9060/metrics")" \
  || die "the edge's /metrics counts no transfer transferred"
# tone_windows WAV HZ OVER: the 250 ms windows (their numbers) in which a phone's recording
# holds HZ at an amplitude over OVER (Goertzel).
tone_windows() {
  "$BIN/sox" "$1" -t raw -e signed-integer -b 16 -c 1 -r 8000 - | python3 -c '
import math, struct, sys
raw = sys.stdin.buffer.read()
x = [s / 32768.0 for s in struct.unpack("<%dh" % (len(raw) // 2), raw[: len(raw) // 2 * 2])]
c, over = 2 * math.cos(2 * math.pi * float(sys.argv[1]) / 8000), float(sys.argv[2])
for i in range(0, len(x) - 1999, 2000):
    s1 = s2 = 0.0
    for v in x[i:i + 2000]:
        s1, s2 = v + c * s1 - s2, s1
    if 2 * math.sqrt(max(s1 * s1 + s2 * s2 - c * s1 * s2, 0.0)) / 2000 > over:
        print(i // 2000)' "$2" "$3"
}
person_dec="$(ls "$PERSON_DIR"/snd/*-dec.wav 2>/dev/null | head -n1)"
caller_dec="$(ls "$PHONE_DIR"/snd/*-dec.wav 2>/dev/null | head -n1)"
[ -n "$person_dec" ] && [ -n "$caller_dec" ] || die "a phone recorded nothing $(person_context)"
from_caller="$(tone_windows "$person_dec" 950 0.1)"
from_person="$(tone_windows "$caller_dec" 1150 0.1)"
[ "$(wc -w <<<"$from_caller")" -ge 8 ] || die "the person did not hear the caller (950 Hz windows: $from_caller) $(person_context)"
[ "$(wc -w <<<"$from_person")" -ge 8 ] || die "the caller did not hear the person (1150 Hz windows: $from_person) $(person_context)"
first_caller="$(head -n1 <<<"$from_caller")"
first_person="$(head -n1 <<<"$from_person")"
brief="$(tone_windows "$person_dec" 400 0.04 | awk -v before="$first_caller" '$1 < before' | wc -l)"
[ "$brief" -ge 4 ] || die "the person did not hear triage's voice (400 Hz) before the caller: $brief windows $(person_context)"
chime="$( (tone_windows "$caller_dec" 523.25 0.03; tone_windows "$caller_dec" 659.25 0.03) | sort -n | uniq)"
[ "$(wc -w <<<"$chime")" -ge 3 ] || die "the caller did not hear the hold chime (windows: $chime) $(person_context)"
[ "$(tail -n1 <<<"$chime")" -lt "$first_person" ] \
  || die "the caller heard the hold chime after the person (chime windows: $(tr "\n" " " <<<"$chime")the person from window $first_person)"
id="$(call_session)"
[ -n "$id" ] || die "the edge named no session for the call: $edge_log"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && grep -q "transferred to advisor (warm" <<<"$shown"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the record's $id does not end transferred to the advisor, warm: $shown"
  sleep 1
done
grep -qF "$BRIEF" <<<"$shown" || die "the record's $id does not hold triage's brief: $shown"
log "ok: a caller was put through to triage's advisor (a phone at $PERSON_URI), warm: bridged $bridged_in s into the call; the person heard triage's brief ($brief windows) then the caller ($(wc -w <<<"$from_caller") windows); the caller heard the hold chime ($(wc -w <<<"$chime")) then the person ($(wc -w <<<"$from_person")); counted transferred; $id recorded"

# People who cannot take the call come back to the agent (tests/tests/sip_phone/bridge.rs's
# busy person and warm.rs's unanswered one are the same against local mode). The caller asks
# for the cashier (phrase 1, 500 Hz), whose phone takes one call at a time and already rings
# with a third phone's call: it answers the edge 486, and the transfer comes back to triage
# as `busy`. Then the caller asks for the manager (phrase 2, 600 Hz), whose phone rings and
# is never answered: after the 10 s triage's transfers may ring, the edge cancels it,
# `no_answer`. Each time triage is told the typed outcome and says sorry (the simulator's
# rule for a failed transfer_to_person); the caller hears the hold chime, then triage again.
# The edge counts both outcomes, and the record's session has them.
log "a busy person and one who does not answer: each transfer comes back to triage"
SORRY="Sorry, nobody could take your call right now."
transfer_sim failed error "$SORRY" cashier manager
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/quiet.wav" trim 0 100
person_phone cashier "$CASHIER_PORT" "audio_codecs=PCMU;answermode=manual" "$PHONE_DIR/quiet.wav" -t 120
person_phone manager "$MANAGER_PORT" "audio_codecs=PCMU;answermode=manual" "$PHONE_DIR/quiet.wav" -t 120
person_phone occupier "$OCCUPIER_PORT" "audio_codecs=PCMU" "$PHONE_DIR/quiet.wav" -t 120 \
  -e "/dial sip:cashier@$NODE_IP:$CASHIER_PORT;transport=udp"
deadline=$((SECONDS + 15))
until grep -q "Incoming call" "$PHONE_DIR/cashier/baresip.log"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the cashier's phone does not ring with the other call: $(cat "$PHONE_DIR/cashier/baresip.log") -- $(cat "$PHONE_DIR/occupier/baresip.log")"
  sleep 0.2
done
# The caller: phrase 1, 20 s (the busy transfer, triage's apology), phrase 2, 24 s (the
# manager's phone rings 10 s, the apology); then it hangs up.
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/f-gap.wav" trim 0 20
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/f-2.wav" synth 1.5 sine 600 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/f-tail.wav" trim 0 24
"$BIN/sox" "$PHONE_DIR/lead.wav" "$PHONE_DIR/tone.wav" "$PHONE_DIR/f-gap.wav" "$PHONE_DIR/f-2.wav" \
  "$PHONE_DIR/f-tail.wav" "$PHONE_DIR/failed.wav"
PHONE_SAY="$PHONE_DIR/failed.wav" call_start 75
failed_context() {
  echo "-- the SIP edge: $(edge_since) -- the cashier: $(cat "$PHONE_DIR/cashier/baresip.log") -- the manager: $(cat "$PHONE_DIR/manager/baresip.log") -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
}
deadline=$((SECONDS + 60))
until [ "$(grep -c "transfer ended" <<<"$(edge_since)")" -ge 2 ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the two transfers did not end $(failed_context)"
  sleep 0.5
done
grep -q "Incoming call" "$PHONE_DIR/manager/baresip.log" || die "the manager's phone never rang $(failed_context)"
call_over
people_gone
sim_stop
edge_log="$(edge_since)"
for said in 'outcome="busy"' 'outcome="no_answer"'; do
  grep -qF -- "$said" <<<"$edge_log" || die "the edge did not log a transfer ended $said $(failed_context)"
done
! grep -q "bridged" <<<"$edge_log" || die "a person who could not take the call was bridged $(failed_context)"
metrics="$(curl -sf "http://$NODE_IP:9060/metrics")" || die "the edge's /metrics"
for outcome in busy no_answer; do
  grep -q "^switchboard_sip_transfers_total{outcome=\"$outcome\"} [1-9]" <<<"$metrics" \
    || die "the edge's /metrics counts no transfer $outcome: $(grep transfers_total <<<"$metrics")"
done
# The caller heard triage's voice (400 Hz) after the last hold chime: off hold, with triage.
caller_dec="$(ls "$PHONE_DIR"/snd/*-dec.wav 2>/dev/null | head -n1)"
[ -n "$caller_dec" ] || die "the caller's phone recorded nothing $(failed_context)"
chime="$( (tone_windows "$caller_dec" 523.25 0.03; tone_windows "$caller_dec" 659.25 0.03) | sort -n | uniq)"
[ "$(wc -w <<<"$chime")" -ge 3 ] || die "the caller did not hear the hold chime (windows: $chime) $(failed_context)"
again="$(tone_windows "$caller_dec" 400 0.04 | awk -v after="$(tail -n1 <<<"$chime")" '$1 > after' | wc -l)"
[ "$again" -ge 4 ] || die "the caller did not hear triage after the last hold chime ($again windows) $(failed_context)"
id="$(call_session)"
[ -n "$id" ] || die "the edge named no session for the call: $edge_log"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && grep -q "transfer_busy" <<<"$shown" \
  && grep -q "transfer_no_answer" <<<"$shown" && [ "$(grep -cF "$SORRY" <<<"$shown")" -ge 2 ]; do
  [ "$SECONDS" -lt "$deadline" ] || die "the record's $id does not hold both failed transfers, each told the caller: $shown"
  sleep 1
done
log "ok: the busy cashier (486) and the unanswered manager (cancelled after 10 s) each came back to triage as a typed outcome, which told the caller ($again windows of triage after the last hold chime); counted busy and no_answer; $id recorded"

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
deadline=$((SECONDS + 120))
until [ "$(gateway_pods '{range .items[*]}{.spec.hostNetwork}{" "}{.status.phase}{"\n"}{end}')" = "true Running" ]; do
  [ "$SECONDS" -lt "$deadline" ] || { k -n "$RNS" get pods -o wide >&2; die "not one gateway pod on the node's network"; }
  sleep 2
done
# The simulator's Example Bank script, hearing the 500 Hz tone (phrase 1) as the balance
# request that tcp.cjs waits for, 600 Hz (2) as the caller's details and 700 Hz (3) as the
# balance asked for once verified (journey.cjs), and ending turns after 400 ms of silence.
{ cat "$ROOT/dataplane/sim/banking.yaml"
  printf 'sonic:\n  turnDetection: { silenceMs: { high: 400, medium: 400, low: 400 } }\n'
  printf '  phrases:\n    1: "I'"'"'d like to check my balance"\n'
  printf '    2: "My name is Ada Lovelace, account 12345678, sort code 12-34-56"\n'
  printf '    3: "My balance please"\n'; } >"$DIR/e2e-webrtc-sim.yaml"
sim_start --script "$DIR/e2e-webrtc-sim.yaml"
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
# A spoken conversation across pods over WebRTC: headless Chromium (journey.cjs, its
# microphone the page's own phrase tones) goes triage -> idv -> banking on one session, each
# agent's runtime pod heard in turn; the caller's details barge in on idv's question, and an
# ICE restart comes before the last turn.
journey="$(node "$ROOT/dataplane/tests/webrtc/journey.cjs" "$BIN/../node_modules/playwright-core" "$HTTP_URL/" \
  "$(command -v chromium)" "$NS/triage" "$NS/idv" "$NS/banking" 2>"$DIR/e2e-journey.err" | tail -n1)" \
  || die "the Chromium conversation failed: $(tail -n 20 "$DIR/e2e-journey.err") -- the gateway: $(gateway_logs)"
echo "$journey" | python3 -c '
import json, os, sys
call = json.load(sys.stdin)["call"]
agents = ["triage", "idv", "banking"]  # as the session names them, without the namespace
assert call["handoffs"] == [agents[0] + " -> " + agents[1], agents[1] + " -> " + agents[2]], call
assert call["starts"][0] == agents[0] and agents[2] in call["starts"], call
assert len(call["sessions"]) == 1, "one session throughout: %s" % call
assert all(call["heard"].get(a, 0) > 0.01 for a in agents), "each agent heard: %s" % call["heard"]
assert "1234.56" in call["said"].get(agents[2], ""), "banking gave the balance: %s" % call["said"]
assert call["interruptions"] == ["idv"], "the details, spoken over idv, interrupted it once: %s" % call
r = call["restart"]
assert r["status"] == 200 and r["changed"] and r["connected"] and r["newStarts"] == 0, "the ICE restart: %s" % r
assert not call["errors"], call["errors"]
assert call["deleted"] == 200, call
print("heard triage %.3f, idv %.3f, banking %.3f; idv interrupted in %d ms; ICE restarted; banking said %r"
      % (*(call["heard"][a] for a in agents), call["bargeInMs"], call["said"][agents[2]][:60]))
' >"$DIR/e2e-journey.heard" || die "the Chromium conversation across pods: $journey"
log "ok: Chromium over WebRTC went triage -> idv -> banking on one session: $(cat "$DIR/e2e-journey.heard")"
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
sim_stop
recorded triage_sessions "$((before + 3))" "the WebRTC calls' sessions are not in the record"
journey_id="$(echo "$journey" | python3 -c 'import json,sys; print(json.load(sys.stdin)["call"]["sessions"][0])')"
deadline=$((SECONDS + 20))
until sessions list --since 1h --agent "$NS/banking" --limit 200 | grep "^$journey_id " \
  | grep -q "$NS/triage -> $NS/idv -> $NS/banking"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the Chromium conversation ($journey_id) is not recorded through triage, idv and banking"
  sleep 1
done
log "ok: the WebRTC calls recorded ($journey_id through triage, idv and banking)"

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
sim_start --script "$DIR/e2e-webrtc-sim.yaml"
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
sim_stop

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
# kube-proxy programs the load balancer's address within its sync period. An INVITE sent
# before that is not forwarded, and it leaves a conntrack entry for the phone's address and
# port that is not rewritten either: the INVITE's retransmissions, and the next try from the
# same port, keep that entry alive, so no later try would be forwarded (CI's run of 77417d7:
# two tries over 100 s, both unanswered). So: wait for kube-proxy's rule for the address
# and port, and clear the phone's UDP conntrack entries before each try.
deadline=$((SECONDS + 60))
until iptables -w -t nat -S KUBE-SERVICES 2>/dev/null | grep -- "-d $NODE_IP/32 " | grep -- "loadbalancer IP" \
  | grep -qE -- "-p udp .*--dport $SIP_LB_PORT( |$)"; do
  [ "$SECONDS" -lt "$deadline" ] \
    || die "kube-proxy has no rule for the load balancer's $NODE_IP:$SIP_LB_PORT: $(iptables -w -t nat -S KUBE-SERVICES 2>&1 | grep -- "$NODE_IP/32")"
  sleep 1
done
sim_start
before="$(triage_sessions)" || die "cannot read the record"
deadline=$((SECONDS + 90))
until conntrack -D -p udp -s "$PHONE_IP" >/dev/null 2>&1 || true
  dial 45 "$NODE_IP:$SIP_LB_PORT" && grep -q "Call established" "$PHONE_DIR/baresip.log"; do
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
sim_stop
recorded triage_sessions "$((before + 1))" "the call's session is not in the record"
log "ok: a caller from outside ($PHONE_IP, trunk outside) reached triage through the SIP edge's LoadBalancer at $NODE_IP:$SIP_LB_PORT; heard RMS $rms over $length s; recorded"

# An outbound call (POST /v1/calls, placed with `switchboard call`) through the same edge to
# the phone in its network namespace, answering by itself as sip:callee@PHONE_IP
# (tests/tests/sip_phone/outbound.rs is the same against local mode; chart_sip_outbound.rs
# renders the trunk). Outbound calls need credentials: the release gets API keys (a Secret
# of hashes: the edge's, marked calls=edge, with a session for each of its calls; one marked
# calls=place that reaches triage only), the edge its key and the phone as its outbound
# trunk. With the placer's key the call is placed at the gateway's Service; the edge dials
# the phone, which answers, says its phrase and hangs up at the end of its WAV, having heard
# triage; `switchboard call` follows the call to its end, and the record has its session, in
# which triage heard the phrase.
log "an outbound call placed at the gateway, through the SIP edge to a phone at $PHONE_IP"
EDGE_KEY="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PLACER_KEY="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
printf 'edge %s sessions=500 calls=edge\nplacer %s sessions=5 agents=%s/triage calls=place\n' \
  "$(sha "$EDGE_KEY")" "$(sha "$PLACER_KEY")" "$NS" >"$PHONE_DIR/api-keys"
# (Applied: the release's namespace outlives this run.)
k -n "$RNS" create secret generic e2e-api-keys --from-file=api-keys="$PHONE_DIR/api-keys" --dry-run=client -o yaml \
  | k apply -f - >/dev/null
k -n "$RNS" create secret generic e2e-edge-key --from-literal=api-key="$EDGE_KEY" --dry-run=client -o yaml \
  | k apply -f - >/dev/null
printf '%s\n' "$PLACER_KEY" >"$PHONE_DIR/placer-key"
"$BIN/helm" upgrade "$RELEASE" "$ROOT/charts/switchboard" --namespace "$RNS" --reuse-values \
  --set gateway.apiKeysSecret=e2e-api-keys --set sip.gatewayKey.existingSecret=e2e-edge-key \
  --set sip.outbound.trunk="sip:$PHONE_IP:$phone_port" --set-string sip.outbound.callerId=+442079460000 \
  --wait --timeout 180s >&2 \
  || { k -n "$RNS" get pods,svc -o wide >&2; die "the release did not roll with API keys and the outbound trunk"; }
on_pod_network switchboard-sip
load_balanced switchboard-sip
sim_start
before="$(triage_sessions)" || die "cannot read the record"
# place_call: the phone (in its namespace) waits to answer, triage calls it through the
# gateway with the placer's key, and `switchboard call` follows the call to its end (what it
# printed in `placed`); returns once the phone's call is over too.
place_call() {
  rm -f "$PHONE_DIR/baresip.log"
  dial 90 answer &
  CALL_PID=$!
  CALL_FROM="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local deadline=$((SECONDS + 20))
  until grep -qs "baresip is ready" "$PHONE_DIR/baresip.log"; do
    [ "$SECONDS" -lt "$deadline" ] || die "the callee's phone did not start: $(cat "$PHONE_DIR/baresip.log" 2>/dev/null)"
    sleep 0.2
  done
  # The edge connects to the gateway for the calls to place once it runs: until it has, a
  # call is refused at once, naming no trunk; tried again then.
  deadline=$((SECONDS + 60))
  until placed="$("$CHAT" call "sip:callee@$PHONE_IP:$phone_port" --agent "$NS/triage" --gateway "$HTTP_URL" \
    --api-key-file "$PHONE_DIR/placer-key" --follow-seconds 60 2>&1)"; do
    grep -qi "trunk\|edge" <<<"$placed" && [ "$SECONDS" -lt "$deadline" ] \
      || die "the outbound call failed: $placed -- the SIP edge: $(edge_since) -- the phone: $(cat "$PHONE_DIR/baresip.log")"
    sleep 2
  done
  call_over
}
place_call
grep -q "answered (SIP 200) session gw-" <<<"$placed" && grep -q "completed" <<<"$placed" \
  || die "the outbound call was not answered and completed: $placed"
grep -q "Call established" "$PHONE_DIR/baresip.log" || die "the callee's phone took no call: $(cat "$PHONE_DIR/baresip.log")"
grep -q "outbound call answered" <<<"$(edge_since)" || die "the edge logged no outbound call answered: $(edge_since)"
rms="$(heard_from 0)"
python3 -c "import sys; sys.exit(0 if float('${rms:-0}') > 0.01 else 1)" \
  || die "the callee heard silence (RMS ${rms:-?}) -- the simulator: $(tail -n 20 "$DIR/e2e-sim.log")"
sim_stop
id="$(sed -n 's/.*answered (SIP 200) session \(gw-[^ ]*\).*/\1/p' <<<"$placed" | head -n1)"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && grep -q ' user .*phrase 1' <<<"$shown"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the outbound call's session $id is not in the record with the callee's phrase: $shown"
  sleep 1
done
log "ok: an outbound call placed with a calls=place key reached the phone at $PHONE_IP through the SIP edge; the callee heard triage (RMS $rms); $id recorded with its phrase: $(grep -m1 'completed' <<<"$placed")"

# An outbound call a machine answers (tests/tests/sip_phone/amd.rs is the same against local
# mode). Triage is given answering-machine detection (spec.telephony.answeringMachine:
# leaveMessage, with its message); the gateway hands it to the edge with the call. The
# callee answers as a voicemail would: 4 s of a monologue (pink noise in a syllable
# rhythm), the beep (1000 Hz, ending 5 s in), then silence while it records. The edge
# decides "machine" from the monologue, waits for the beep, and only then opens triage's
# session, which says the Agent's message instead of its greeting: the callee's recording
# holds nothing of the agent before the beep, then the message; the record has it.
log "an outbound call a machine answers: triage leaves its message after the beep"
MESSAGE="This is Example Bank about your card. Please call us back today."
k -n "$NS" patch agent triage --type merge \
  -p "{\"spec\":{\"telephony\":{\"answeringMachine\":{\"onMachine\":\"leaveMessage\",\"message\":\"$MESSAGE\"}}}}" >/dev/null
# The operator publishes it in the routing table the gateway reads, and rolls triage's pods.
deadline=$((SECONDS + 60))
until k -n "$RNS" get configmaps -o yaml | grep -qF "$MESSAGE"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the routing table does not carry triage's answeringMachine"
  sleep 1
done
k -n "$NS" wait --for=condition=Ready agent/triage --timeout=120s >&2 || die "triage is not Ready with answeringMachine"
for d in $(k -n "$NS" get deployments -o name); do
  k -n "$NS" rollout status "$d" --timeout=180s >&2 || die "$d did not finish rolling out"
done
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/m-1.wav" trim 0 0.3
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/m-2.wav" synth 4 pinknoise tremolo 4 60 vol 0.4
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/m-3.wav" trim 0 0.2
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/m-4.wav" synth 0.5 sine 1000 vol 0.5
"$BIN/sox" -n -r 8000 -c 1 -b 16 "$PHONE_DIR/m-5.wav" trim 0 18
"$BIN/sox" "$PHONE_DIR"/m-{1,2,3,4,5}.wav "$PHONE_DIR/machine.wav"
sim_start
PHONE_SAY="$PHONE_DIR/machine.wav" place_call
sim_stop
grep -q "answered by: machine" <<<"$placed" || die "the edge did not decide a machine answered: $placed -- $(edge_since)"
edge_log="$(edge_since)"
grep -q "the message to the machine starts" <<<"$edge_log" && grep -q "AfterBeep" <<<"$edge_log" \
  || die "the edge did not start the message after the beep: $edge_log"
after="$(sed -n 's/.*first heard the agent \([0-9]*\) ms.*/\1/p' <<<"$placed" | head -n1)"
[ "${after:-0}" -ge 5000 ] || die "the callee heard the agent before its beep ended (5 s): ${after:-never} ms: $placed"
# The 250 ms windows of the callee's recording louder than speech's floor.
voiced="$("$BIN/sox" "$(ls "$PHONE_DIR"/snd/*-dec.wav | head -n1)" -t raw -e signed-integer -b 16 -c 1 -r 8000 - \
  | python3 -c '
import math, struct, sys
raw = sys.stdin.buffer.read()
x = struct.unpack("<%dh" % (len(raw) // 2), raw[: len(raw) // 2 * 2])
for i in range(0, len(x) - 1999, 2000):
    if math.sqrt(sum(v * v for v in x[i:i + 2000]) / 2000) / 32768 > 0.02:
        print(i // 2000)')"
[ "$(wc -w <<<"$voiced")" -ge 4 ] || die "the machine recorded no message (voiced windows: $voiced) -- $edge_log"
[ "$(head -n1 <<<"$voiced")" -ge 19 ] \
  || die "the machine recorded the agent before its beep ended (window $(head -n1 <<<"$voiced") of 250 ms)"
id="$(sed -n 's/.*answered (SIP 200) session \(gw-[^ ]*\).*/\1/p' <<<"$placed" | head -n1)"
deadline=$((SECONDS + 30))
until shown="$(sessions show "$id" 2>&1)" && grep -qF "$MESSAGE" <<<"$shown"; do
  [ "$SECONDS" -lt "$deadline" ] || die "the record's $id does not hold the message left: $shown"
  sleep 1
done
! grep -q "How can I help you today" <<<"$shown" || die "the machine was greeted, not left the message: $shown"
log "ok: a machine answered triage's outbound call ($(grep -m1 'answered by' <<<"$placed")); the message started after its beep ($after ms after the answer) and is on its recording ($(wc -w <<<"$voiced") windows from $(head -n1 <<<"$voiced")) and in the record ($id)"
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
