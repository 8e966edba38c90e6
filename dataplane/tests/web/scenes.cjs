// The console's browser scenes past the first conversation: a consent answered by clicking,
// a voice session with an open microphone over WebRTC (the default) and one over the
// WebSocket (WebRTC unticked), voice falling back to the WebSocket when WebRTC cannot
// connect, push-to-talk held on Space, and a connection cut by a TCP relay this file runs
// between Chromium and local mode, resumed from the banner.
"use strict";
const net = require("net");
const { PATIENCE, LINES, pageRead, shot, say, replied, open, connect } = require("./helpers.cjs");

/** A dispute answered by clicking Allow. */
async function consent(context, url, outDir, errors) {
  const result = {};
  const page = await open(context, url, errors);
  await connect(page);
  await say(page, "I don't recognise a payment on my account", replied, ["idv", "sort code"]);
  await say(page, LINES[1], replied, ["idv", "verified"]);
  await say(page, "I want to dispute a payment", replied, ["disputes", "dispute payment"]);
  await page.getByLabel("Message").fill("dispute payment tx-1003");
  await page.keyboard.press("Enter");
  const allow = page.getByRole("group", { name: "Consent for open_dispute" }).getByRole("button", { name: "Allow" });
  await allow.waitFor({ timeout: PATIENCE });
  await shot(page, outDir, "5-consent");
  await allow.click();
  await page.waitForFunction(replied, ["disputes", "dispute is open"], { timeout: PATIENCE });
  result.consent = await page.textContent("#log .consent");
  result.disputeCard = await page.textContent("#log .tool[data-tool=open_dispute]");
  result.log = await page.evaluate(pageRead, "#log");
  await page.close();
  return result;
}

/** The page's voice counters. */
const counters = (page) => page.evaluate(() => {
  const s = window.switchboard;
  return {
    framesSent: s.framesSent, audioChunks: s.audioChunks, audioSamples: s.audioSamples,
    scheduledSamples: s.scheduledSamples, events: [...new Set(s.events)], inputEnds: s.inputEnds,
    playbackState: voice.playbackState(), micSettings: s.micSettings,
  };
});

/** Waits until no more reply audio arrives (two reads 700 ms apart agree) and `figures` turns completed. */
async function settle(page, figures) {
  await page.waitForFunction((n) => {
    const s = window.switchboard;
    const settled = s.lastAudio === s.audioSamples;
    s.lastAudio = s.audioSamples;
    return settled && document.querySelectorAll("#log .figures").length >= n;
  }, figures, { polling: 700, timeout: PATIENCE });
}

/**
 * Voice with an open microphone: the default agent `triage` (hybrid) hears the request and
 * hands over to `idv` (voice), which hears the identity details from the same microphone,
 * runs the check and answers aloud.
 */
async function openMic(context, url, outDir, errors) {
  const result = {};
  const page = await open(context, url, errors);
  if (await page.$eval("#agent", (s) => s.value) !== "triage") throw new Error("triage is not preselected");
  result.voiceDefaults = await page.evaluate(() => ["aec", "ns", "agc"].map((id) => document.getElementById(id).checked));
  // The WebSocket's voice (WebRTC's is webrtcVoice's).
  await page.uncheck("#webrtc");
  if (process.env.SWITCHBOARD_WEB_RAW_MIC) {
    for (const id of ["#aec", "#ns", "#agc"]) await page.uncheck(id);
  }
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => {
    const s = window.switchboard;
    const log = document.querySelector("#log");
    return s.scheduledSamples > 0 && log.querySelector(".divider[data-from=triage][data-to=idv]")
      && log.querySelector(".tool.ok[data-tool=perform_idv_check]")
      && [...log.querySelectorAll(".msg.assistant[data-agent=idv]")].some((b) => /verified/i.test(b.textContent));
  }, null, { timeout: PATIENCE });
  await settle(page, 2);
  result.log = await page.evaluate(pageRead, "#log");
  result.turns = await page.$$eval("#turns tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  result.counters = await counters(page);
  result.transport = await transport(page);
  await shot(page, outDir, "4-voice");
  // A barge-in's handling in Chromium's own audio clock: 1 s of reply audio scheduled, cut
  // after 500 ms by the interruption handler, which stops playback and sends
  // bidi_audio_played (what was played) to the runtime on the live session.
  result.bargeIn = await page.evaluate(async () => {
    const s = window.switchboard;
    const errors = () => s.events.filter((t) => t === "bidi_error").length;
    const before = errors();
    voice.newReply();
    // 100 ms at 24 kHz, as the session's `audio` event gives it.
    const chunk = { data: new Uint8Array(2400 * 2), format: { encoding: "pcm16", sampleRate: 24000 } };
    for (let i = 0; i < 10; i++) voice.play(chunk);
    await new Promise((r) => setTimeout(r, 500));
    handle({ type: "bidi_interruption" });
    const played = s.audioPlayed[s.audioPlayed.length - 1];
    await new Promise((r) => setTimeout(r, 1000));
    return { played, scheduledMs: 1000, open: s.session !== null && s.session.connected, newErrors: errors() - before };
  });
  await page.close();
  return result;
}

/**
 * Push-to-talk: Space held (focus on no control) opens the microphone and sends while held;
 * released once triage heard the request, the page sends bidi_audio_input_end and no more
 * audio, and the reply arrives with its first-audio figure.
 */
async function pushToTalk(context, url, outDir, errors) {
  const result = {};
  const page = await open(context, url, errors);
  await page.uncheck("#webrtc");
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.down("Space");
  result.pressed = await page.getAttribute("#talk", "aria-pressed");
  await page.waitForFunction(() => [...document.querySelectorAll("#log .msg.user")]
    .some((b) => /check my balance/i.test(b.textContent)), null, { timeout: PATIENCE });
  await page.keyboard.up("Space");
  result.released = await page.getAttribute("#talk", "aria-pressed");
  const atRelease = await counters(page);
  // Triage answers and hands over; idv asks for the details, by voice.
  await page.waitForFunction(() => document.querySelector("#log .divider[data-from=triage][data-to=idv]")
    && document.querySelector("#log .msg.assistant[data-agent=idv]") && window.switchboard.scheduledSamples > 0,
  null, { timeout: PATIENCE });
  await settle(page, 1);
  result.atRelease = atRelease;
  result.counters = await counters(page);
  result.log = await page.evaluate(pageRead, "#log");
  result.turns = await page.$$eval("#turns tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  await shot(page, outDir, "7-push-to-talk");
  await page.close();
  return result;
}

/** What the page says of its transport. */
const transport = (page) => page.$eval("#transport", (o) => ({ text: o.textContent, kind: o.dataset.transport }));

/** The voice scene's goal: triage heard the request and handed over, idv heard the details,
 * ran the check and said the caller is verified (runs in the page). */
function verifiedByVoice() {
  const log = document.querySelector("#log");
  return log.querySelector(".divider[data-from=triage][data-to=idv]") && log.querySelector(".tool.ok[data-tool=perform_idv_check]")
    && [...log.querySelectorAll(".msg.assistant[data-agent=idv]")].some((b) => /verified/i.test(b.textContent));
}

/**
 * Voice by default, over WebRTC: Start voice offers a call to local mode's edge, the session
 * runs on its data channel and the microphone on its Opus track; triage hears the request
 * and hands over to idv, which hears the details and answers aloud on the call's remote
 * track, heard in the page (a Web Audio analyser on it) and counted by WebRTC's statistics;
 * no reply audio comes as session messages. A new conversation ends the call.
 */
async function webrtcVoice(context, url, outDir, errors) {
  const result = {};
  const page = await open(context, url, errors);
  result.ticked = await page.isChecked("#webrtc");
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => document.querySelector("#transport").dataset.transport !== "connecting"
    && document.querySelector("#transport").dataset.transport !== "none", null, { timeout: PATIENCE });
  result.transport = await transport(page);
  await page.waitForFunction(verifiedByVoice, null, { timeout: PATIENCE });
  await page.waitForFunction(() => window.switchboard.callAudibleMs > 0, null, { timeout: PATIENCE });
  // Until idv's spoken answer was heard out: no more audible reply for 1.4 s, two turns done.
  await page.waitForFunction(() => {
    const s = window.switchboard;
    const settled = s.lastAudible === s.callAudibleMs;
    s.lastAudible = s.callAudibleMs;
    return settled && document.querySelectorAll("#log .figures").length >= 2;
  }, null, { polling: 1400, timeout: PATIENCE });
  result.log = await page.evaluate(pageRead, "#log");
  result.turns = await page.$$eval("#turns tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  result.counters = await counters(page);
  result.callAudibleMs = await page.evaluate(() => window.switchboard.callAudibleMs);
  result.stats = await page.evaluate(() => window.switchboard.call.stats());
  result.remotePlaying = await page.evaluate(() => {
    const a = document.querySelector("#remote-audio");
    return { attached: a.srcObject === window.switchboard.call.remote, paused: a.paused, tracks: a.srcObject.getAudioTracks().length };
  });
  await shot(page, outDir, "4b-voice-webrtc");
  // A new conversation leaves the session: its call ends (DELETE, the peer connection closed).
  await page.evaluate(() => { window.oldCall = window.switchboard.call; });
  await page.getByRole("button", { name: "New conversation" }).first().click();
  result.callEnded = await page.waitForFunction(() => window.oldCall.pc.connectionState === "closed", null, { timeout: PATIENCE })
    .then(() => true, () => false);
  await page.close();
  return result;
}

/**
 * WebRTC that cannot connect: the edge's answer reaches Chromium without its candidates
 * (this scene takes them out on the way), so ICE has nowhere to go; after the bound the
 * page ends the call (DELETE) and runs the voice session on the WebSocket, saying so, and
 * triage hears the request and answers aloud there.
 */
async function webrtcFallback(context, url, outDir, errors) {
  const result = { stripped: 0, deletes: [] };
  const page = await open(context, url, errors);
  await page.route("**/v1/webrtc", async (route) => {
    const response = await route.fetch();
    const lines = (await response.text()).split("\r\n");
    const kept = lines.filter((l) => !l.startsWith("a=candidate"));
    result.stripped += lines.length - kept.length;
    result.offerStatus = response.status();
    await route.fulfill({ response, body: kept.join("\r\n") });
  });
  page.on("response", (r) => {
    if (r.request().method() === "DELETE" && /\/v1\/webrtc\/./.test(r.url())) result.deletes.push(r.status());
  });
  const clicked = Date.now();
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => document.querySelector("#transport").dataset.transport === "websocket", null, { timeout: PATIENCE });
  result.fellBackMs = Date.now() - clicked;
  result.transport = await transport(page);
  await page.waitForFunction(() => window.switchboard.audioChunks > 0 && [...document.querySelectorAll("#log .msg.user")]
    .some((b) => /check my balance/i.test(b.textContent)), null, { timeout: PATIENCE });
  result.counters = await counters(page);
  result.call = await page.evaluate(() => window.switchboard.call);
  result.log = await page.evaluate(pageRead, "#log");
  await shot(page, outDir, "4c-voice-fallback");
  await page.close();
  return result;
}

/** A TCP relay to `target` whose connections `cut()` drops at once, as a network would. */
function relay(target) {
  const pairs = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.hostname);
    const pair = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => { pairs.delete(pair); client.destroy(); upstream.destroy(); };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}/`,
    cut() { const n = pairs.size; for (const [a, b] of pairs) { a.destroy(); b.destroy(); } pairs.clear(); return n; },
    close() { this.cut(); server.close(); },
  })));
}

/**
 * A session through the relay, cut after the caller was verified; Reconnect on the banner
 * resumes it: the same session id, memory kept, and banking answers the balance (which it
 * reads for the verified caller only).
 */
async function reconnect(context, url, outDir, errors) {
  const result = {};
  const link = await relay(new URL(url));
  try {
    const page = await open(context, link.url, errors);
    result.before = await connect(page);
    await say(page, LINES[0], replied, ["idv", "sort code"]);
    await say(page, LINES[1], replied, ["idv", "verified"]);
    await page.waitForFunction(() => document.querySelector("#memory tr[data-key=verifiedUser]"), null, { timeout: PATIENCE });
    result.cut = link.cut();
    const button = page.getByRole("button", { name: "Reconnect" });
    await button.waitFor({ timeout: PATIENCE });
    result.banner = await page.textContent("#banner-text");
    result.focused = await page.evaluate(() => document.activeElement?.id);
    await shot(page, outDir, "6-dropped");
    await page.keyboard.press("Enter"); // the banner focused Reconnect
    await page.waitForFunction(() => document.querySelector("#banner").hidden && window.switchboard.session
      && window.switchboard.session.connected && !document.querySelector("#text").disabled
      && window.switchboard.events.filter((t) => t === "bidi_connection_start").length >= 2,
    null, { timeout: PATIENCE });
    result.after = await page.evaluate(() => window.switchboard.sessionId);
    result.memoryAfter = await page.$$eval("#memory tr", (rows) => rows.map((r) => r.dataset.key));
    await say(page, LINES[2], replied, ["banking", "balance"]);
    result.log = await page.evaluate(pageRead, "#log");
    await shot(page, outDir, "8-resumed");
    await page.close();
  } finally {
    link.close();
  }
  return result;
}

module.exports = { consent, openMic, webrtcVoice, webrtcFallback, pushToTalk, reconnect };
