// A spoken conversation from headless Chromium (playwright-core) over WebRTC through a
// gateway, across agents: triage → idv → banking, each served by its own runtime (on the real
// node, its own pod). Prints what happened as one JSON line. Usage:
//   node journey.cjs <playwright-core dir> <gateway url> <chromium> <triage> <idv> <banking>
// (the agents' names as the gateway routes them, e.g. `ns/triage`; the session's messages
// name an agent without its namespace, and what is printed is keyed by that name).
//
// The microphone is the page's own: an oscillator behind a gain node, streamed as the call's
// audio track, silent until the page speaks a phrase. A phrase is the Bedrock simulator's
// tone for its id (400 + 100 * id Hz, 1.2 s; docs/src/testing/simulator.md), spoken only
// once the agent has finished its answer to the last one (so no phrase depends on how long
// a turn took) — but the second, spoken over idv's question once it is heard: a barge-in.
// Before the third, an ICE restart (WHIP's PATCH) moves the call onto new ICE credentials. The simulator's script (tests/cluster/e2e-smoke.sh) reads phrase 1 as the
// balance request (triage hands over to idv), 2 as the caller's details (idv checks them)
// and 3 as "my balance please" (idv hands over to banking, which gives the balance). For each agent
// the page counts the reply audio it heard (WebRTC's own statistics, the received track's
// energy) while that agent served the session, and what it said (its transcripts).
"use strict";
const [playwrightDir, url, executablePath, triage, idv, banking] = process.argv.slice(2);
const { chromium } = require(playwrightDir);
const PATIENCE = 60000;

/** In the page: the conversation. Returns what it saw. */
async function converse(page, agents) {
  return page.evaluate(async ({ routed, PATIENCE }) => {
    // An agent's name without its namespace, as the session's messages give it.
    const bare = (name) => String(name || "").split("/").pop();
    const agents = Object.fromEntries(Object.entries(routed).map(([k, v]) => [k, bare(v)]));
    const seen = { messages: [], heard: {}, spoken: [] };
    const types = () => seen.messages.map((m) => m.type);
    const until = (what, test) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(types())}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 50); };
      check();
    });
    const context = new AudioContext({ sampleRate: 48000 });
    await context.resume();
    const oscillator = context.createOscillator();
    const gain = context.createGain();
    gain.gain.value = 0;
    const microphone = context.createMediaStreamDestination();
    oscillator.connect(gain).connect(microphone);
    oscillator.start();
    const say = async (id) => {
      oscillator.frequency.setValueAtTime(400 + 100 * id, context.currentTime);
      gain.gain.setValueAtTime(0.5, context.currentTime);
      seen.spoken.push(id);
      await new Promise((done) => setTimeout(done, 1200));
      gain.gain.setValueAtTime(0, context.currentTime);
    };
    const pc = new RTCPeerConnection();
    for (const track of microphone.stream.getAudioTracks()) pc.addTrack(track, microphone.stream);
    pc.addEventListener("track", (event) => {
      const audio = new Audio();
      audio.srcObject = event.streams[0] || new MediaStream([event.track]);
      audio.play().catch(() => {});
    });
    const channel = pc.createDataChannel("session");
    let serving = null;
    channel.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "bidi_connection_start") serving = bare(message.agent);
      message.servedBy = serving;
      seen.messages.push(message);
    });
    channel.addEventListener("open", () => channel.send(JSON.stringify({ type: "session_start", agent: routed.triage })));
    channel.addEventListener("close", () => { seen.channelClosed = true; });
    // The energy of the reply audio received, per agent serving when it arrived, and when
    // it last grew.
    let energy = 0;
    let grewAt = Date.now();
    const meter = setInterval(async () => {
      const stats = await pc.getStats();
      stats.forEach((s) => {
        if (s.type !== "inbound-rtp" || s.kind !== "audio") return;
        const grown = (s.totalAudioEnergy || 0) - energy;
        energy = s.totalAudioEnergy || 0;
        if (grown > 1e-6) grewAt = Date.now();
        if (serving && grown > 0) seen.heard[serving] = (seen.heard[serving] || 0) + grown;
      });
    }, 200);
    await pc.setLocalDescription(await pc.createOffer());
    const response = await fetch("/v1/webrtc", {
      method: "POST", body: pc.localDescription.sdp, headers: { "content-type": "application/sdp" },
    });
    seen.location = response.headers.get("location");
    const answer = await response.text();
    if (response.status !== 201) throw new Error(`POST answered ${response.status}: ${answer}`);
    await pc.setRemoteDescription({ type: "answer", sdp: answer });
    await until("the connection", () => pc.connectionState === "connected");
    await until("bidi_connection_start", () => serving === agents.triage);
    // The index of the first message after `from` that `test` picks, or -1.
    const after = (from, test) => seen.messages.findIndex((m, i) => i >= from && test(m));
    const answered = (from, agent) => after(from, (m) => m.type === "bidi_response_complete" && m.servedBy === agent) >= 0;
    const heardUser = (from, pattern) => after(from, (m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && pattern.test(m.text || "")) >= 0;
    const pause = (ms) => new Promise((done) => setTimeout(done, ms));
    // The reply heard out: no audio energy for a second (the caller speaks only then, so no
    // phrase interrupts a reply).
    const heardOut = (what) => until(what, () => Date.now() - grewAt > 1000);
    // Triage's greeting (its Persona speaks first): heard out before the caller speaks.
    await until("triage's greeting", () => after(0, (m) => m.type === "bidi_transcript_stream"
      && !/user/i.test(m.role) && m.servedBy === agents.triage) >= 0);
    await heardOut("triage's greeting to end");
    // 1: the balance request; triage hands the caller to idv, which asks for their details.
    let from = seen.messages.length;
    await say(1);
    await until("the balance request heard", () => heardUser(from, /balance/i));
    await until("the handoff to idv", () => serving === agents.idv);
    // 2: the caller's details, spoken over idv's question (a barge-in: idv stops talking
    // at once, and hears them); idv checks them and says so.
    await until("idv's question begun", () => after(from, (m) => m.type === "bidi_transcript_stream"
      && !/user/i.test(m.role) && m.servedBy === agents.idv) >= 0);
    await until("idv's question heard", () => (seen.heard[agents.idv] || 0) > 0.02);
    from = seen.messages.length;
    const bargeIn = Date.now();
    const speaking = say(2);
    await until("the barge-in", () => after(from, (m) => m.type === "bidi_interruption") >= 0);
    seen.bargeInMs = Date.now() - bargeIn;
    await speaking;
    await until("the details heard", () => heardUser(from, /Lovelace/));
    await until("idv's check", () => after(from, (m) => m.type === "tool_complete" && /idv_check/.test(m.name)) >= 0);
    const checked = after(from, (m) => m.type === "tool_complete" && /idv_check/.test(m.name));
    await until("idv's answer", () => answered(checked, agents.idv));
    await heardOut("idv's answer to end");
    // An ICE restart, as a client whose network changed does it (WHIP: the new credentials
    // and candidates PATCHed, the edge's new credentials answered): the session goes on.
    const answerBefore = pc.remoteDescription.sdp;
    pc.restartIce();
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((done) => {
      if (pc.iceGatheringState === "complete") return done();
      pc.addEventListener("icegatheringstatechange", () => pc.iceGatheringState === "complete" && done());
      setTimeout(done, 3000);
    });
    const offer = pc.localDescription.sdp;
    const ufrag = /a=ice-ufrag:(\S+)/.exec(offer)[1];
    const pwd = /a=ice-pwd:(\S+)/.exec(offer)[1];
    const fragment = `a=ice-ufrag:${ufrag}\r\na=ice-pwd:${pwd}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n`
      + offer.split(/\r?\n/).filter((l) => l.startsWith("a=candidate")).map((c) => `${c}\r\n`).join("");
    const restart = await fetch(seen.location, {
      method: "PATCH", body: fragment, headers: { "content-type": "application/trickle-ice-sdpfrag" },
    });
    const theirs = await restart.text();
    seen.restart = { status: restart.status };
    if (restart.status !== 200) throw new Error(`the ICE restart's PATCH answered ${restart.status}: ${theirs}`);
    const newUfrag = /a=ice-ufrag:(\S+)/.exec(theirs)[1];
    const newPwd = /a=ice-pwd:(\S+)/.exec(theirs)[1];
    seen.restart.changed = !answerBefore.includes(`a=ice-ufrag:${newUfrag}`);
    await pc.setRemoteDescription({ type: "answer", sdp: answerBefore
      .replace(/a=ice-ufrag:\S+/g, `a=ice-ufrag:${newUfrag}`).replace(/a=ice-pwd:\S+/g, `a=ice-pwd:${newPwd}`) });
    const transport = pc.getSenders()[0].transport.iceTransport;
    await until("ICE on the new credentials", () => {
      const pair = transport.getSelectedCandidatePair();
      return pair && pair.local.usernameFragment === ufrag && pc.connectionState === "connected";
    });
    seen.restart.connected = true;
    // 3: the balance, please; idv hands over to banking, which gives it.
    from = seen.messages.length;
    await say(3);
    await until("the handoff to banking", () => serving === agents.banking);
    await until("banking's answer", () => answered(from, agents.banking));
    await pause(1000);
    clearInterval(meter);
    seen.said = {};
    for (const m of seen.messages) {
      if (m.type === "bidi_transcript_stream" && !/user/i.test(m.role) && m.servedBy) {
        seen.said[m.servedBy] = `${seen.said[m.servedBy] || ""}${m.text || ""}`;
      }
    }
    seen.handoffs = seen.messages.filter((m) => m.type === "handoff").map((m) => `${bare(m.from)} -> ${bare(m.to)}`);
    seen.starts = seen.messages.filter((m) => m.type === "bidi_connection_start").map((m) => bare(m.agent));
    seen.restart.newStarts = seen.starts.length - 3;
    seen.sessions = [...new Set(seen.messages.filter((m) => m.type === "bidi_connection_start").map((m) => m.session_id))];
    seen.errors = seen.messages.filter((m) => m.type === "bidi_error" || m.type === "error");
    seen.interruptions = seen.messages.filter((m) => m.type === "bidi_interruption").map((m) => m.servedBy);
    const ended = await fetch(seen.location, { method: "DELETE" });
    seen.deleted = ended.status;
    pc.close();
    context.close();
    seen.types = [...new Set(types())];
    delete seen.messages;
    return seen;
  }, { routed: agents, PATIENCE });
}

async function main() {
  const browser = await chromium.launch({
    executablePath, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
      "--autoplay-policy=no-user-gesture-required", "--allow-loopback-in-peer-connection",
      `--unsafely-treat-insecure-origin-as-secure=${new URL(url).origin}`],
  });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    // A page of the gateway's origin (a gateway serves no console): /healthz.
    await page.goto(`${url}healthz`);
    result.call = await converse(page, { triage, idv, banking });
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
