// The console's Reconnect over WebRTC, in headless Chromium (playwright-core); prints what
// happened as one JSON line and saves screenshots in <out dir>. Usage:
//   node rejoin.cjs <playwright-core dir> <page url> <microphone wav> <chromium> <out dir>
// The call's media and data channel go through a UDP relay this file runs: the edge's
// answer reaches the page with its UDP candidate pointing at the relay (and its ICE-TCP
// candidate taken out), so cutting the relay is the caller's network gone. A voice session
// over WebRTC (the default): triage greets aloud, a typed line is answered; the relay is
// cut; the page notices the call dropped and offers Reconnect; the network comes back and
// Reconnect (Enter: the banner focused it) resumes the same session on a new WebRTC call: the page says WebRTC, the
// conversation so far is still shown, and the next typed line hands over to idv, which is
// heard on the new call; Start voice then puts the microphone on the new call.
"use strict";
const dgram = require("dgram");
const { PATIENCE, pageRead, shot, say, replied, open } = require("./helpers.cjs");
const [playwrightDir, url, wav, executablePath, outDir] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

/** A UDP relay to the edge's `port` on 127.0.0.1, one inside socket per client address;
 * `cut` drops every datagram both ways until `restore`. */
function udpRelay(port) {
  const outside = dgram.createSocket("udp4");
  const inside = new Map();
  const relay = { cut: false, fromClients: 0, dropped: 0 };
  outside.on("message", (data, client) => {
    relay.fromClients++;
    if (relay.cut) return void relay.dropped++;
    const key = `${client.address}:${client.port}`;
    let socket = inside.get(key);
    if (!socket) {
      socket = dgram.createSocket("udp4");
      socket.on("message", (back) => {
        if (relay.cut) return void relay.dropped++;
        outside.send(back, client.port, client.address);
      });
      socket.bind(0, "127.0.0.1");
      inside.set(key, socket);
    }
    socket.send(data, port, "127.0.0.1");
  });
  return new Promise((resolve) => outside.bind(0, "127.0.0.1", () => {
    relay.port = outside.address().port;
    relay.close = () => { outside.close(); for (const s of inside.values()) s.close(); };
    resolve(relay);
  }));
}

/** Every answer to `POST /v1/webrtc` reaches the page with its UDP candidate on the relay and
 * without ICE-TCP candidates (made once the first answer names the edge's port). */
async function throughRelay(page, result) {
  let relay = null;
  await page.route("**/v1/webrtc", async (route) => {
    const response = await route.fetch();
    const lines = (await response.text()).split("\r\n");
    const kept = [];
    for (const line of lines) {
      const candidate = /^a=candidate:\S+ \d+ (udp|tcp) \d+ (\S+) (\d+) typ host/i.exec(line);
      if (!candidate) kept.push(line);
      else if (candidate[1].toLowerCase() === "udp") {
        relay ??= await udpRelay(Number(candidate[3]));
        result.edgePort = Number(candidate[3]);
        kept.push(line.replace(` ${candidate[2]} ${candidate[3]} typ host`, ` 127.0.0.1 ${relay.port} typ host`));
      }
    }
    result.offers = (result.offers || 0) + 1;
    await route.fulfill({ response, body: kept.join("\r\n") });
  });
  return () => relay;
}

/** What the page shows of its transport and call (runs in the page). */
function callRead() {
  const s = window.switchboard;
  const call = s.call;
  return {
    kind: document.querySelector("#transport").dataset.transport,
    text: document.querySelector("#transport").textContent,
    location: call ? call.location : null,
    state: call ? call.pc.connectionState : null,
    starts: s.events.filter((t) => t === "bidi_connection_start").length,
    sessionId: s.sessionId,
    connected: Boolean(s.session && s.session.connected),
    audibleMs: s.callAudibleMs,
  };
}

/** The sum of the gateway's metric `name` (any labels). */
async function metric(name) {
  const text = await (await fetch(`${url}metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

async function scene(context, errors) {
  const result = {};
  const page = await open(context, url, errors);
  const relay = await throughRelay(page, result);
  result.ticked = await page.isChecked("#webrtc");
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => document.querySelector("#transport").dataset.transport === "webrtc"
    && window.switchboard.sessionId && !document.querySelector("#text").disabled, null, { timeout: PATIENCE });
  // Triage's greeting, heard on the call; a typed line (perhaps over the greeting) answered.
  await page.waitForFunction(() => window.switchboard.callAudibleMs > 0
    && document.querySelector("#log .msg.assistant[data-agent=triage]"), null, { timeout: PATIENCE });
  await say(page, "Hello", replied, ["triage", "What would you like to do"]);
  result.before = await page.evaluate(callRead);
  result.logBefore = await page.evaluate(pageRead, "#log");
  result.relayed = relay().fromClients;
  await shot(page, outDir, "9-webrtc-before-drop");

  // The caller's network goes.
  relay().cut = true;
  const cutAt = Date.now();
  const button = page.getByRole("button", { name: "Reconnect" });
  await button.waitFor({ timeout: 2 * PATIENCE });
  result.noticedMs = Date.now() - cutAt;
  result.banner = await page.textContent("#banner-text");
  result.focused = await page.evaluate(() => document.activeElement?.id);
  result.dropped = await page.evaluate(callRead);
  await shot(page, outDir, "9b-webrtc-dropped");
  // The network is back; Reconnect (the gateway detaches the session from the dead call,
  // which its edge has not given up on yet, and parks it for the resume).
  relay().cut = false;
  await page.keyboard.press("Enter");
  await page.waitForFunction((starts) => document.querySelector("#banner").hidden && window.switchboard.session
    && window.switchboard.session.connected && !document.querySelector("#text").disabled
    && document.querySelector("#transport").dataset.transport === "webrtc"
    && window.switchboard.events.filter((t) => t === "bidi_connection_start").length > starts,
  result.before.starts, { timeout: PATIENCE });
  result.after = await page.evaluate(callRead);
  result.logResumed = await page.evaluate(pageRead, "#log");
  // The conversation goes on: triage hands over to idv, which speaks on the new call.
  await say(page, "I'd like to check my balance", () => document.querySelector("#log .divider[data-from=triage][data-to=idv]")
    && document.querySelector("#log .msg.assistant[data-agent=idv]"), null);
  await page.waitForFunction(replied, ["idv", "verify your identity"], { timeout: PATIENCE });
  await page.waitForFunction((heard) => window.switchboard.callAudibleMs > heard, result.after.audibleMs, { timeout: PATIENCE });
  // The microphone is off after Reconnect (as on the WebSocket); Start voice puts it on the new call.
  result.micAfterReconnect = await page.textContent("#mic");
  const sentBefore = (await page.evaluate(() => window.switchboard.call.stats())).packetsSent;
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => document.querySelector("#mic").textContent === "Stop voice", null, { timeout: PATIENCE });
  // A second of the microphone's packets (50 a second) sent on the new call.
  const sentBy = Date.now() + PATIENCE;
  let sent = sentBefore;
  while (sent < sentBefore + 50 && Date.now() < sentBy) {
    await page.waitForTimeout(200);
    sent = (await page.evaluate(() => window.switchboard.call.stats())).packetsSent;
  }
  result.micOnNewCall = { sentBefore, sent, button: await page.textContent("#mic") };
  result.end = await page.evaluate(callRead);
  result.log = await page.evaluate(pageRead, "#log");
  result.resumed = await metric("switchboard_gateway_sessions_resumed_total");
  result.parked = await metric("switchboard_gateway_sessions_parked_total");
  // A reply the caller typed over is one bubble, completed.
  result.streaming = await page.$$eval("#log .msg.assistant.streaming", (b) => b.length);
  result.stats = await page.evaluate(() => window.switchboard.call.stats());
  await shot(page, outDir, "9c-webrtc-resumed");
  // The session ends (its call with it: DELETE) before the page and the relay go.
  result.closedCall = await page.evaluate(async () => {
    const call = window.switchboard.call;
    await window.switchboard.session.close();
    return call.closed;
  });
  await page.close();
  // The record (its writer batches: asked until the resumed half is there).
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${url}v1/sessions/${result.before.sessionId}`);
    if (r.status === 200) {
      result.record = JSON.parse(await r.text());
      if (JSON.stringify(result.record.events).includes("check my balance")) break;
    }
    await new Promise((done) => setTimeout(done, 200));
  }
  relay().close();
  return result;
}

async function main() {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
      "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}%noloop`,
      "--autoplay-policy=no-user-gesture-required",
    ],
  });
  let result = {};
  const errors = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(["microphone"]);
    result = await scene(context, errors);
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
