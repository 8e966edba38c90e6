// A WebRTC call from headless Chromium (playwright-core) over ICE-TCP (RFC 6544): to a
// gateway's edge whose UDP port the test blocks (ICE must fall back to the passive TCP
// candidate), or, with `tcp-only`, to an edge whose answer's UDP candidates the page removes
// before Chromium sees them (TCP is the only way it is told of). Prints what happened as one
// JSON line. Usage:
//   node tcp.cjs <playwright-core dir> <gateway url> <microphone wav> <chromium> <key|""> [tcp-only|""] [agent]
// (agent: triage by default; tests/cluster/e2e-smoke.sh names its namespace's).
// The WAV is the microphone; the call opens the session on its data channel, waits for the
// spoken request's transcript and the agent's answer, then reads WebRTC's own statistics:
// the selected candidate pair (whose protocol says which transport carried the call), the
// audio received and sent. DELETE ends it, and the data channel must close with it.
"use strict";
const [playwrightDir, url, wav, executablePath, key, mode, agent = "triage"] = process.argv.slice(2);
const { chromium } = require(playwrightDir);
const { launch } = require("./browser.cjs");
const PATIENCE = 45000;

/** In the page: the call. Returns what it saw. */
async function call(page) {
  return page.evaluate(async ({ key, tcpOnly, agent, PATIENCE }) => {
    const seen = { messages: [], states: [] };
    const until = (what, test) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(seen)}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 50); };
      check();
    });
    const pc = new RTCPeerConnection();
    pc.addEventListener("connectionstatechange", () => seen.states.push(pc.connectionState));
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    for (const track of mic.getAudioTracks()) pc.addTrack(track, mic);
    pc.addEventListener("track", (event) => {
      const audio = new Audio();
      audio.srcObject = event.streams[0] || new MediaStream([event.track]);
      audio.play().catch(() => {});
    });
    const channel = pc.createDataChannel("session");
    channel.addEventListener("message", (event) => seen.messages.push(JSON.parse(event.data)));
    channel.addEventListener("open", () => {
      seen.opened = true;
      channel.send(JSON.stringify({ type: "session_start", agent }));
    });
    channel.addEventListener("close", () => { seen.channelClosed = true; });
    await pc.setLocalDescription(await pc.createOffer());
    const headers = { "content-type": "application/sdp" };
    if (key) headers.authorization = `Bearer ${key}`;
    const response = await fetch("/v1/webrtc", { method: "POST", body: pc.localDescription.sdp, headers });
    seen.status = response.status;
    seen.location = response.headers.get("location");
    const answer = await response.text();
    if (response.status !== 201) throw new Error(`POST answered ${response.status}: ${answer}`);
    seen.answerCandidates = answer.split(/\r?\n/).filter((l) => l.startsWith("a=candidate"));
    // TCP only: the UDP candidates are not given to Chromium (the edge is ICE-lite and sends
    // no checks of its own, so Chromium learns of no other address).
    const udp = (l) => l.startsWith("a=candidate") && l.split(" ")[2].toLowerCase() === "udp";
    const told = tcpOnly ? answer.split("\r\n").filter((l) => !udp(l)).join("\r\n") : answer;
    seen.toldCandidates = told.split(/\r?\n/).filter((l) => l.startsWith("a=candidate"));
    await pc.setRemoteDescription({ type: "answer", sdp: told });
    await until("the connection", () => pc.connectionState === "connected");
    await until("bidi_connection_start", () => seen.messages.some((m) => m.type === "bidi_connection_start"));
    await until("the caller's transcript", () => seen.messages.some((m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && /balance/i.test(m.text || "")));
    await until("the answer", () => seen.messages.filter((m) => m.type === "bidi_response_complete").length >= 2);
    await new Promise((done) => setTimeout(done, 1000));
    const stats = await pc.getStats();
    let pairId;
    stats.forEach((s) => {
      if (s.type === "transport" && s.selectedCandidatePairId) pairId = s.selectedCandidatePairId;
      if (s.type === "inbound-rtp" && s.kind === "audio") {
        seen.inbound = { packets: s.packetsReceived, energy: s.totalAudioEnergy, lost: s.packetsLost };
      }
      if (s.type === "outbound-rtp" && s.kind === "audio") seen.outbound = { packets: s.packetsSent };
    });
    const pair = pairId && stats.get(pairId);
    if (pair) {
      const local = stats.get(pair.localCandidateId);
      const remote = stats.get(pair.remoteCandidateId);
      seen.selected = {
        local: { protocol: local.protocol, tcpType: local.tcpType, type: local.candidateType },
        remote: { protocol: remote.protocol, address: remote.address, port: remote.port, type: remote.candidateType },
        bytesSent: pair.bytesSent, bytesReceived: pair.bytesReceived,
      };
    }
    const ended = await fetch(seen.location, { method: "DELETE" });
    seen.deleted = ended.status;
    // The edge's close (SCTP stream reset, DTLS close_notify) reaches Chromium over TCP.
    await until("the data channel's close", () => seen.channelClosed).catch(() => {});
    pc.close();
    return seen;
  }, { key, tcpOnly: mode === "tcp-only", agent, PATIENCE });
}

async function main() {
  // The microphone needs a secure context: a gateway reached over plain HTTP at an
  // address other than localhost (the real node's Service) is treated as one.
  const browser = await launch(chromium, executablePath, { wav, secureOrigin: new URL(url).origin });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    // A page of the gateway's origin (it serves no console): /healthz.
    await page.goto(`${url}healthz`);
    result.call = await call(page);
  } finally {
    result.errors = errors;
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
