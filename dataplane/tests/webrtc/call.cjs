// A real WebRTC call from headless Chromium (playwright-core) to the gateway's WebRTC edge;
// prints what happened as one JSON line. Usage:
//   node call.cjs <playwright-core dir> <local url> <microphone wav> <chromium> <keyed url> <key> <details Hz>
// 1. refusals, with offers Chromium made: a wrong key at a gateway that wants one (401,
//    nothing answered), an Origin it does not allow (403); malformed SDP, an offer with no
//    data channel and one with no audio, at local mode (400 each, naming what is wrong);
// 2. the call, to local mode: the WAV is the microphone; POST the offer, ICE and DTLS
//    connect, the data channel carries session_start and brings the server's messages
//    (connection start, transcripts of what the microphone said, responses); the agent's
//    reply audio plays on the remote track (its energy read from WebRTC's stats and from
//    a Web Audio analyser); an ICE restart PATCHed mid-call; DELETE ends it;
// 3. a client that vanishes: a call to the keyed gateway through the test's UDP relay, cut
//    after the greeting ("event cut" on stdout; the test answers "parked" on stdin once the
//    gateway parked the session), then a new call resuming it with the newest token.
"use strict";
const [playwrightDir, url, wav, executablePath, keyedUrl, key, detailsHz] = process.argv.slice(2);
const readline = require("readline");
const told = readline.createInterface({ input: process.stdin });
const nextWord = () => new Promise((done) => told.once("line", done));
const { chromium } = require(playwrightDir);
const { launch } = require("./browser.cjs");
const PATIENCE = 45000;

/** In the page: an offer from a peer connection with the given parts, ICE gathered. */
async function makeOffer(page, parts) {
  return page.evaluate(async (parts) => {
    const pc = new RTCPeerConnection();
    if (parts.audio) {
      const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
      for (const track of mic.getAudioTracks()) pc.addTrack(track, mic);
    }
    if (parts.channel) pc.createDataChannel("session");
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((done) => {
      if (pc.iceGatheringState === "complete") return done();
      pc.addEventListener("icegatheringstatechange", () => pc.iceGatheringState === "complete" && done());
      setTimeout(done, 3000);
    });
    const sdp = pc.localDescription.sdp;
    pc.close();
    return sdp;
  }, parts);
}

async function post(base, sdp, headers = {}) {
  const response = await fetch(`${base}v1/webrtc`, {
    method: "POST", body: sdp, headers: { "content-type": "application/sdp", ...headers },
  });
  const text = await response.text();
  return { status: response.status, type: response.headers.get("content-type"), body: text };
}

async function refusals(page, result) {
  const full = await makeOffer(page, { audio: true, channel: true });
  result.offerHasOpus = /opus\/48000\/2/i.test(full);
  result.wrongKey = await post(keyedUrl, full, { authorization: "Bearer not-the-key" });
  result.noKey = await post(keyedUrl, full);
  result.badOrigin = await post(keyedUrl, full, { authorization: `Bearer ${key}`, origin: "https://elsewhere.example" });
  result.malformed = await post(url, "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\nm=audio nine UDP/TLS/RTP/SAVPF 111\r\n");
  result.notSdp = await post(url, "hello");
  result.noChannel = await post(url, await makeOffer(page, { audio: true, channel: false }));
  result.noAudio = await post(url, await makeOffer(page, { audio: false, channel: true }));
  result.wrongType = await (async () => {
    const r = await fetch(`${url}v1/webrtc`, { method: "POST", body: full, headers: { "content-type": "text/plain" } });
    return { status: r.status, body: await r.text() };
  })();
}

/** In the page: the call. Returns what it saw. */
async function call(page) {
  return page.evaluate(async (PATIENCE) => {
    const seen = { messages: [], states: [], energy: 0, peak: 0 };
    const pc = new RTCPeerConnection();
    pc.addEventListener("connectionstatechange", () => seen.states.push(pc.connectionState));
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    for (const track of mic.getAudioTracks()) pc.addTrack(track, mic);
    const channel = pc.createDataChannel("session");
    let analyser;
    pc.addEventListener("track", (event) => {
      const stream = event.streams[0] || new MediaStream([event.track]);
      const audio = new Audio();
      audio.srcObject = stream;
      audio.play().catch(() => {});
      const context = new AudioContext();
      analyser = context.createAnalyser();
      context.createMediaStreamSource(stream).connect(analyser);
    });
    const samples = new Float32Array(2048);
    const sampler = setInterval(() => {
      if (!analyser) return;
      analyser.getFloatTimeDomainData(samples);
      let sum = 0;
      for (const s of samples) sum += s * s;
      seen.peak = Math.max(seen.peak, Math.sqrt(sum / samples.length));
    }, 50);
    const until = (what, test) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(seen.messages.map((m) => m.type))}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 50); };
      check();
    });
    channel.addEventListener("message", (event) => seen.messages.push(JSON.parse(event.data)));
    channel.addEventListener("open", () => {
      seen.opened = true;
      channel.send(JSON.stringify({ type: "session_start", agent: "triage", modalities: ["audio", "text"] }));
    });
    channel.addEventListener("close", () => { seen.channelClosed = true; });
    await pc.setLocalDescription(await pc.createOffer());
    const response = await fetch("/v1/webrtc", { method: "POST", body: pc.localDescription.sdp, headers: { "content-type": "application/sdp" } });
    seen.status = response.status;
    seen.type = response.headers.get("content-type");
    seen.location = response.headers.get("location");
    const answer = await response.text();
    if (response.status !== 201) throw new Error(`POST answered ${response.status}: ${answer}`);
    seen.answerCandidates = answer.split(/\r?\n/).filter((l) => l.startsWith("a=candidate"));
    await pc.setRemoteDescription({ type: "answer", sdp: answer });
    // Trickle: the candidates the browser finds after the offer, PATCHed as WHIP clients do.
    pc.addEventListener("icecandidate", async (event) => {
      if (!event.candidate || !event.candidate.candidate) return;
      const fragment = `a=ice-ufrag:${event.candidate.usernameFragment}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\na=${event.candidate.candidate}\r\n`;
      const r = await fetch(seen.location, { method: "PATCH", body: fragment, headers: { "content-type": "application/trickle-ice-sdpfrag" } });
      (seen.patches = seen.patches || []).push(r.status);
    });
    await until("the connection", () => pc.connectionState === "connected");
    await until("bidi_connection_start", () => seen.messages.some((m) => m.type === "bidi_connection_start"));
    // What the microphone said, heard by the agent, and its answer spoken back.
    await until("the caller's transcript", () => seen.messages.some((m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && /balance/i.test(m.text || "")));
    await until("a response", () => seen.messages.some((m) => m.type === "bidi_response_complete"));
    await until("reply audio", () => seen.peak > 0.01);
    // Triage hands over to idv, which asks for the caller's details.
    await until("the handoff and idv's question", () => seen.messages.some((m) => m.type === "handoff")
      && seen.messages.filter((m) => m.type === "bidi_response_complete").length >= 2);
    // An ICE restart mid-call, as a client whose network changed does it (WHIP: the new
    // credentials and candidates PATCHed; the edge's new credentials answered).
    const starts = seen.messages.filter((m) => m.type === "bidi_connection_start").length;
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
    const candidates = offer.split(/\r?\n/).filter((l) => l.startsWith("a=candidate"));
    const fragment = `a=ice-ufrag:${ufrag}\r\na=ice-pwd:${pwd}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n`
      + candidates.map((c) => `${c}\r\n`).join("");
    const restart = await fetch(seen.location, { method: "PATCH", body: fragment, headers: { "content-type": "application/trickle-ice-sdpfrag" } });
    seen.restart = { status: restart.status, type: restart.headers.get("content-type") };
    const theirs = await restart.text();
    const newUfrag = /a=ice-ufrag:(\S+)/.exec(theirs)[1];
    const newPwd = /a=ice-pwd:(\S+)/.exec(theirs)[1];
    seen.restart.changed = !answer.includes(`a=ice-ufrag:${newUfrag}`);
    await pc.setRemoteDescription({ type: "answer", sdp: answer
      .replace(/a=ice-ufrag:\S+/g, `a=ice-ufrag:${newUfrag}`).replace(/a=ice-pwd:\S+/g, `a=ice-pwd:${newPwd}`) });
    const transport = pc.getSenders()[0].transport.iceTransport;
    await until("ICE on the new credentials", () => {
      const pair = transport.getSelectedCandidatePair();
      return pair && pair.local.usernameFragment === ufrag && pc.connectionState === "connected";
    });
    seen.restart.connected = true;
    // The same session goes on: the details spoken after the restart reach idv, which answers.
    await until("the details heard after the restart", () => seen.messages.some((m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && /Lovelace/.test(m.text || "")));
    await until("idv's answer", () => seen.messages.filter((m) => m.type === "bidi_response_complete").length >= 3);
    seen.restart.newStarts = seen.messages.filter((m) => m.type === "bidi_connection_start").length - starts;
    // Hear a little more of it, then read the receiver's statistics.
    await new Promise((r) => setTimeout(r, 1500));
    const stats = await pc.getStats();
    stats.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "audio") {
        seen.inbound = { packets: s.packetsReceived, energy: s.totalAudioEnergy, lost: s.packetsLost, concealed: s.concealedSamples, samples: s.totalSamplesReceived };
      }
      if (s.type === "outbound-rtp" && s.kind === "audio") seen.outbound = { packets: s.packetsSent };
      if (s.type === "candidate-pair" && s.nominated && s.state === "succeeded") seen.pair = { rtt: s.currentRoundTripTime };
    });
    clearInterval(sampler);
    const ended = await fetch(seen.location, { method: "DELETE" });
    seen.deleted = ended.status;
    await until("the data channel's close", () => seen.channelClosed);
    const again = await fetch(seen.location, { method: "DELETE" });
    seen.deletedAgain = again.status;
    pc.close();
    return seen;
  }, PATIENCE);
}

/** In a page of the keyed gateway: helpers for calls with its key. */
async function install(page) {
  await page.evaluate((PATIENCE) => {
    window.until = (what, test, seen) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(seen.messages)}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 50); };
      check();
    });
    window.startCall = async (key, start, voice) => {
      const seen = { messages: [] };
      const pc = new RTCPeerConnection();
      const mic = voice || await navigator.mediaDevices.getUserMedia({ audio: true });
      for (const track of mic.getAudioTracks()) pc.addTrack(track, mic);
      const channel = pc.createDataChannel("session");
      channel.addEventListener("message", (event) => seen.messages.push(JSON.parse(event.data)));
      channel.addEventListener("open", () => channel.send(JSON.stringify(start)));
      await pc.setLocalDescription(await pc.createOffer());
      const response = await fetch("/v1/webrtc", { method: "POST", body: pc.localDescription.sdp,
        headers: { "content-type": "application/sdp", authorization: `Bearer ${key}` } });
      seen.status = response.status;
      seen.location = response.headers.get("location");
      const answer = await response.text();
      if (response.status !== 201) throw new Error(`POST answered ${response.status}: ${answer}`);
      await pc.setRemoteDescription({ type: "answer", sdp: answer });
      return { pc, seen };
    };
  }, PATIENCE);
}

/** A call to the keyed gateway whose client vanishes (the test cuts its relay) after the
 * greeting; once the gateway parked the session, a new call resumes it and speaks. */
async function resume(browser, result) {
  const page = await browser.newPage();
  // A page of its origin (the gateway serves no console): /healthz.
  await page.goto(`${keyedUrl}healthz`);
  await install(page);
  const r = {};
  r.first = await page.evaluate(async (key) => {
    window.a = await startCall(key, { type: "session_start", agent: "triage" });
    const seen = window.a.seen;
    await until("bidi_connection_start", () => seen.messages.some((m) => m.type === "bidi_connection_start"), seen);
    await until("the greeting", () => seen.messages.some((m) => m.type === "bidi_response_complete"), seen);
    // The newest token (a handoff brings a new bidi_connection_start) and the last number:
    // on the data channel every message carries its seq (reply audio, numbered too, is on
    // the track, so a WebRTC client cannot count).
    const at = seen.messages.map((m) => m.type).lastIndexOf("bidi_connection_start");
    const start = seen.messages[at];
    return { status: seen.status, session_id: start.session_id, token: start.resume_token, agent: start.agent,
      last_seq: seen.messages[seen.messages.length - 1].seq };
  }, key);
  process.stdout.write("event cut\n");
  r.parked = await nextWord();
  r.second = await page.evaluate(async ({ key, first, detailsHz }) => {
    window.a.pc.close();
    // The new call's microphone: the details' phrase tone, played once the session is back
    // (the fake capture device's WAV is shared by the page and has run on meanwhile).
    const context = new AudioContext();
    const tone = context.createOscillator();
    tone.frequency.value = detailsHz;
    const gain = context.createGain();
    gain.gain.value = 0;
    const voice = context.createMediaStreamDestination();
    tone.connect(gain).connect(voice);
    tone.start();
    window.b = await startCall(key, { type: "session_start", resume_token: first.token, last_seq: first.last_seq }, voice.stream);
    const seen = window.b.seen;
    await until("bidi_connection_start", () => seen.messages.some((m) => m.type === "bidi_connection_start"), seen);
    const start = seen.messages.find((m) => m.type === "bidi_connection_start");
    await new Promise((done) => setTimeout(done, 1000));
    gain.gain.setValueAtTime(0.25, context.currentTime);
    gain.gain.setValueAtTime(0, context.currentTime + 1.5);
    await until("the details heard on the new call", () => seen.messages.some((m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && /Lovelace/.test(m.text || "")), seen);
    const ended = await fetch(seen.location, { method: "DELETE" });
    window.b.pc.close();
    return { status: seen.status, session_id: start.session_id, heard: true, deleted: ended.status,
      types: seen.messages.map((m) => m.type) };
  }, { key, first: r.first, detailsHz: Number(detailsHz) });
  result.resume = r;
  await page.close();
}

async function main() {
  const browser = await launch(chromium, executablePath, { wav });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await refusals(page, result);
    result.call = await call(page);
    const start = result.call.messages.find((m) => m.type === "bidi_connection_start");
    const id = start && start.session_id;
    result.sessionId = id;
    // The session is in the conversation record once it ended.
    for (let i = 0; i < 200 && id; i++) {
      const r = await fetch(`${url}v1/sessions/${id}`);
      if (r.status === 200) {
        result.record = JSON.parse(await r.text());
        if (result.record.outcome === "ended") break;
      }
      await new Promise((done) => setTimeout(done, 100));
    }
    await resume(browser, result);
    result.metrics = (await (await fetch(`${url}metrics`)).text()).split("\n")
      .filter((l) => l.startsWith("switchboard_gateway_webrtc_"));
  } finally {
    result.errors = errors;
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
  told.close();
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
