// Pages of other origins calling the gateway over WebRTC, in headless Chromium
// (playwright-core), with the TypeScript client the page loads as the console vendors it
// (/client/webrtc.js, served with the page by the test). Prints what happened as one JSON
// line. Usage:
//   node cors.cjs <playwright-core dir> <allowed page url> <foreign page url> <gateway url> <microphone wav> <chromium>
// 1. the allowed page (an origin the gateway's --allowed-origin lists): WebRtcCall.open posts
//    the offer across origins (a preflight first), reads the Location, opens the data
//    channel; the session runs on it (session_start, transcripts, replies), the WAV is the
//    microphone, the reply is heard (WebRTC's own stats); a trickle PATCH under the page's
//    ICE ufrag alone; close() (DELETE), then a second DELETE whose 404 the page reads;
// 2. the foreign page (an origin not allowed): WebRtcCall.open fails (its preflight is
//    refused), and a POST that needs no preflight (text/plain) is sent but unreadable.
"use strict";
const [playwrightDir, pageUrl, foreignUrl, gateway, wav, executablePath] = process.argv.slice(2);
const { chromium } = require(playwrightDir);
const { launch } = require("./browser.cjs");
const PATIENCE = 45000;

/** In the allowed page: the call with the TypeScript client. */
async function call(page) {
  return page.evaluate(async ({ gateway, PATIENCE }) => {
    const seen = { messages: [], pageOrigin: location.origin };
    const until = (what, test) => new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(seen)}`)), PATIENCE);
      const check = () => { if (test()) { clearTimeout(timer); done(); } else setTimeout(check, 50); };
      check();
    });
    const { WebRtcCall } = await import("/client/webrtc.js");
    const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
    const call = await WebRtcCall.open({ url: `${gateway}v1/webrtc`, microphone: mic.getAudioTracks()[0] });
    seen.location = call.location;
    call.play();
    const socket = call.socket;
    socket.onmessage = (event) => { if (typeof event.data === "string") seen.messages.push(JSON.parse(event.data)); };
    await new Promise((done) => { socket.onopen = done; if (socket.readyState === 1) done(); });
    socket.send(JSON.stringify({ type: "session_start", agent: "triage" }));
    await until("bidi_connection_start", () => seen.messages.some((m) => m.type === "bidi_connection_start"));
    await until("the caller's transcript", () => seen.messages.some((m) => m.type === "bidi_transcript_stream"
      && /user/i.test(m.role) && /balance/i.test(m.text || "")));
    await until("the answer", () => seen.messages.filter((m) => m.type === "bidi_response_complete").length >= 2);
    await new Promise((done) => setTimeout(done, 1000));
    seen.stats = await call.stats();
    // Trickle ICE as RFC 8840 has it: the ICE session named by its ufrag alone.
    const ufrag = /a=ice-ufrag:(\S+)/.exec(call.pc.localDescription.sdp)[1];
    const patched = await fetch(call.location, {
      method: "PATCH",
      headers: { "content-type": "application/trickle-ice-sdpfrag" },
      body: `a=ice-ufrag:${ufrag}\r\na=end-of-candidates\r\n`,
    });
    seen.patched = patched.status;
    await call.close();
    seen.closed = call.closed;
    seen.deletedAgain = (await fetch(call.location, { method: "DELETE" })).status;
    for (const track of mic.getTracks()) track.stop();
    return seen;
  }, { gateway, PATIENCE });
}

/** In the foreign page: what it can do. */
async function foreign(page) {
  return page.evaluate(async ({ gateway }) => {
    const seen = { pageOrigin: location.origin };
    const { WebRtcCall } = await import("/client/webrtc.js");
    try {
      const call = await WebRtcCall.open({ url: `${gateway}v1/webrtc`, connectTimeoutMs: 3000 });
      seen.opened = true;
      await call.close();
    } catch (error) {
      seen.error = error.name;
      seen.message = error.message;
    }
    try {
      const response = await fetch(`${gateway}v1/webrtc`, { method: "POST", body: "v=0", headers: { "content-type": "text/plain" } });
      seen.simple = `read ${response.status}`;
    } catch (error) {
      seen.simple = String(error);
    }
    return seen;
  }, { gateway });
}

async function main() {
  const browser = await launch(chromium, executablePath, { wav });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(pageUrl);
    result.call = await call(page);
    const other = await browser.newPage();
    other.on("pageerror", (e) => errors.push(String(e)));
    await other.goto(foreignUrl);
    result.foreign = await foreign(other);
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
