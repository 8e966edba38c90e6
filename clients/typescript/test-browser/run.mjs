// The browser parts of @switchboard/client in a real headless Chromium (playwright-core;
// both from tests/tools/install.sh): a page served from its own origin opens a voice session
// with a real `switchboard local` (which allows that origin), its Microphone sends the fake
// microphone (a WAV: silence, a tone, silence) through an AudioWorklet, the simulator hears
// a turn and answers, and its Player schedules and plays the reply. The microphone opens
// paused (measured, nothing sent) with the browser's processing off, as asked. Checks what the page
// reports, a barge-in (a tone sent over the reply once some of it played) that stops the
// player and reports what was heard, and that the credential went in the access_token query parameter (a browser
// cannot set headers on a WebSocket); then, against a real `switchboard gateway` that asks for
// API keys and allows the page's origin, that the key from the URL is taken (refused only by
// the gateway's empty routing table, 4404) and its absence is not (4401). Prints one JSON line.
//   node test-browser/run.mjs <playwright-core dir> <chromium> <switchboard binary> [built dir, default dist]
import { spawn } from "node:child_process";
import { createHash, generateKeyPairSync } from "node:crypto";
import { once } from "node:events";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const [playwrightDir, chromiumPath, bin, built = "dist"] = process.argv.slice(2);
const here = fileURLToPath(new URL("..", import.meta.url));
const root = fileURLToPath(new URL("../../..", import.meta.url));
const { chromium } = createRequire(import.meta.url)(playwrightDir);

/** `ms` of a 440 Hz tone at `amplitude` (0: silence), PCM16 16 kHz. */
function tone(ms, amplitude) {
  const out = Buffer.alloc(32 * ms);
  for (let i = 0; i < out.length / 2; i++) out.writeInt16LE(Math.round(amplitude * 32767 * Math.sin((2 * Math.PI * 440 * i) / 16000)), i * 2);
  return out;
}

function wav(pcm) {
  const header = Buffer.alloc(44);
  header.write("RIFF", 0);
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write("WAVEfmt ", 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36);
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}

/** Serves the package's dist/ and the test page. */
async function serve() {
  const types = { ".html": "text/html", ".js": "text/javascript", ".map": "application/json" };
  const server = createServer((req, res) => {
    const path = req.url === "/" ? "/test-browser/page.html" : normalize(decodeURIComponent(req.url.split("?")[0]));
    if (!path.startsWith("/dist/") && path !== "/test-browser/page.html") {
      res.writeHead(404).end();
      return;
    }
    try {
      const file = path.startsWith("/dist/") ? join(here, built, path.slice("/dist/".length)) : join(here, path);
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return server;
}

// A copy of the Example Bank whose triage listens first: the shipped one speaks its greeting
// first (a phone caller hears it), and this page's turn would barge in on the greeting
// rather than on the reply to what it said.
function listeningBank(dir) {
  const bank = join(dir, "banking");
  cpSync(join(root, "examples/banking"), bank, { recursive: true });
  const triage = join(bank, "triage.yaml");
  const text = readFileSync(triage, "utf8");
  const listening = text.replace(/^  speakFirst: true$/m, "  speakFirst: false");
  assert.notEqual(listening, text, "the Example Bank's triage speaks first: the test makes it listen");
  writeFileSync(triage, listening);
  return bank;
}

async function startLocal(origin, bank) {
  const child = spawn(bin, ["local", bank, "--port", "0", "--record-database-url", "off", "--allowed-origin", origin], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, SWITCHBOARD_LOG: "warn", NO_PROXY: "127.0.0.1,localhost" },
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (c) => (err += c));
  const address = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`switchboard local did not start: ${err}`)), 60000);
    child.stdout.on("data", (c) => {
      out += c;
      const found = /Web page: http:\/\/([^/\s]+)\//.exec(out);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`switchboard local exited (${code}): ${err}`)));
  });
  return { child, address };
}

/** A gateway with one API key, no routes, and the page's origin allowed. */
async function startGateway(dir, origin, apiKey) {
  writeFileSync(join(dir, "gateway.pem"), generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }));
  writeFileSync(join(dir, "keys"), `page ${createHash("sha256").update(apiKey).digest("hex")}\n`);
  writeFileSync(join(dir, "routes.json"), JSON.stringify({ apiVersion: "switchboard.dev/v1alpha1", kind: "RoutingTable", routes: [] }));
  const child = spawn(bin, ["gateway", "--listen", "127.0.0.1:0", "--gateway-key-file", join(dir, "gateway.pem"),
    "--routes-file", join(dir, "routes.json"), "--api-keys-file", join(dir, "keys"), "--allowed-origin", origin], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, SWITCHBOARD_LOG: "info", NO_PROXY: "127.0.0.1,localhost" },
  });
  let err = "";
  const address = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`switchboard gateway did not start: ${err}`)), 60000);
    child.stderr.on("data", (c) => {
      err += c;
      const found = /gateway serving \/v1\/session addr=(\S+)/.exec(err);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`switchboard gateway exited (${code}): ${err}`)));
  });
  return { child, address };
}

const dir = mkdtempSync(join(tmpdir(), "switchboard-client-browser-"));
const microphone = join(dir, "microphone.wav");
// Silence, a turn, then silence (the page barges in on the reply itself, once some of it
// played, so the test does not hang on when the reply starts).
writeFileSync(microphone, wav(Buffer.concat([tone(1500, 0), tone(1200, 0.5), tone(20000, 0)])));
const server = await serve();
const origin = `http://127.0.0.1:${server.address().port}`;
const local = await startLocal(origin, listeningBank(dir));
const gateway = await startGateway(dir, origin, "page-key");
const browser = await chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: [
    "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
    `--use-file-for-fake-audio-capture=${microphone}%noloop`,
    "--autoplay-policy=no-user-gesture-required",
  ],
});
const errors = [];
let result;
try {
  const context = await browser.newContext();
  await context.grantPermissions(["microphone"]);
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  const sockets = [];
  const sent = [];
  page.on("websocket", (ws) => {
    sockets.push(ws.url());
    ws.on("framesent", (frame) => typeof frame.payload === "string" && sent.push(frame.payload));
  });
  page.on("response", (r) => r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => window.ready === true);
  result = await page.evaluate((url) => window.voiceTurn(url), `ws://${local.address}/v1/session`);
  result.sockets = sockets;
  const gatewayUrl = `ws://${gateway.address}/v1/session`;
  result.withKey = await page.evaluate(([url, key]) => window.refusal(url, key), [gatewayUrl, "page-key"]);
  result.withoutKey = await page.evaluate(([url]) => window.refusal(url), [gatewayUrl]);
  result.played = sent.map((f) => JSON.parse(f)).filter((m) => m.type === "bidi_audio_played");
} finally {
  result = { ...result, errors };
  await browser.close();
  server.close();
  local.child.kill("SIGTERM");
  gateway.child.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(result)}\n`);

assert.deepEqual(result.errors, [], "no page errors");
assert.equal(result.mode, "hybrid");
assert.equal(result.sockets.length, 3, "the voice session, then two at the gateway");
for (const socket of result.sockets.slice(0, 2)) {
  assert.equal(new URL(socket).searchParams.get("access_token"), "page-key", "the credential is in the URL");
}
// The refusal is the gateway's bidi_error. Its close code is 4404/4401, or 1006 where Chromium
// lost the close frame: the gateway closes a refused socket without reading the page's
// session_start, and the reset that follows can drop the frame (1 run in ~20 under load).
assert.equal(result.withKey.error, "unknown_agent", "the key from the URL was taken");
assert.ok([4404, 1006].includes(result.withKey.code), `closed ${result.withKey.code}`);
assert.ok([4401, 1006].includes(result.withoutKey.code), `closed ${result.withoutKey.code}`);
// Refused before the start is read: the reset may also beat the bidi_error.
if (result.withoutKey.code === 4401 || result.withoutKey.error) assert.equal(result.withoutKey.error, "missing_key");
assert.ok(result.framesSent >= 100, `the microphone sent its frames: ${result.framesSent}`);
assert.equal(result.paused.frames, 0, "nothing sent while paused");
assert.ok(result.paused.levels >= 5, `the level is measured while paused: ${result.paused.levels} frames`);
assert.equal(result.echoCancellation, false, "the processing asked for, as the browser applied it");
for (const event of ["bidi_speech_started", "bidi_response_start"]) {
  assert.ok(result.events.includes(event), `${event} among ${result.events}`);
}
assert.ok(result.chunks > 0 && result.scheduledMs > 200, `reply audio scheduled: ${result.chunks} chunks, ${result.scheduledMs} ms`);
assert.ok(Math.abs(result.scheduledSamples / 24 - result.scheduledMs) < 1, `samples and ms agree at 24 kHz: ${result.scheduledSamples}, ${result.scheduledMs}`);
assert.equal(result.playback, "running", "the playback clock runs");
assert.ok(result.events.includes("bidi_interruption"), "the tone barged in");
assert.ok(result.playedAtInterruption >= 800 && result.playedAtInterruption <= result.scheduledMs, `cut part way: ${result.playedAtInterruption} of ${result.scheduledMs} ms`);
assert.equal(result.playedAfter, 0, "the player stopped and dropped the rest");
assert.equal(result.played.length, 1, "one bidi_audio_played");
assert.ok(Math.abs(result.played[0].audio_played_ms - result.playedAtInterruption) <= 100, `it reports what was heard: ${JSON.stringify(result.played)}`);
assert.equal(result.closed, 1000);
console.error("browser: microphone, session and playback work in Chromium");
