// The console served by a gateway that wants an API key, in headless Chromium; prints one
// JSON line. Usage: node gateway.cjs <playwright-core dir> <page url> <chromium> <out dir> <key>
// The page asks for the key; a wrong one is refused with the gateway's reason; the right
// one lists the routing table's Agents (with the console's summaries the table carries); a
// typed line gets its answer through the gateway, and the workflow graph follows it. Voice
// at this gateway, which serves no WebRTC (no --webrtc-udp: POST /v1/webrtc answers 404),
// runs on the WebSocket, the page saying why, and triage's spoken greeting arrives there.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { PATIENCE, LINES, pageRead, agentsRead, graphRead, shot, say, replied, connect } = require("./helpers.cjs");
const [playwrightDir, url, executablePath, outDir, key] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

/** A WAV of `seconds` of silence (16 kHz PCM16 mono): the page's microphone. */
function silence(seconds) {
  const pcm = Buffer.alloc(32000 * seconds);
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
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "switchboard-console-")), "silence.wav");
  fs.writeFileSync(file, Buffer.concat([header, pcm]));
  return file;
}

async function main() {
  const wav = silence(20);
  const browser = await chromium.launch({
    executablePath, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
      "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}%noloop`, "--autoplay-policy=no-user-gesture-required"],
  });
  const result = {};
  const errors = [];
  try {
    const context = await browser.newContext();
    await context.grantPermissions(["microphone"]);
    const page = await context.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    const field = page.getByLabel("API key or token");
    result.asked = await field.waitFor({ timeout: PATIENCE }).then(() => true, () => false);
    await field.fill("not-the-key");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /not valid/.test(document.querySelector("#login-why").textContent),
      null, { timeout: PATIENCE });
    result.refused = await page.textContent("#login-why");
    await shot(page, outDir, "9-gateway-key");
    await field.fill(key);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
    result.asked_after = await page.isVisible("#login");
    result.agents = await page.$$eval("#agent option", (os) => os.filter((o) => !o.disabled).map((o) => o.value));
    result.panel = await page.evaluate(agentsRead);
    await connect(page);
    await say(page, LINES[0], replied, ["idv", "sort code"]);
    result.log = await page.evaluate(pageRead, "#log");
    result.graph = await page.evaluate(graphRead);
    await shot(page, outDir, "10-gateway-console");
    // Voice: WebRTC is off at this gateway, so the WebSocket.
    await page.getByRole("button", { name: "Start voice" }).click();
    await page.waitForFunction(() => document.querySelector("#transport").dataset.transport === "websocket",
      null, { timeout: PATIENCE });
    result.transport = await page.$eval("#transport", (o) => o.textContent);
    await page.waitForFunction(() => window.switchboard.audioChunks > 0 && window.switchboard.session?.connected,
      null, { timeout: PATIENCE });
    result.voice = await page.evaluate(() => ({ audioChunks: window.switchboard.audioChunks, call: window.switchboard.call,
      agent: window.switchboard.agent }));
    await shot(page, outDir, "10b-gateway-voice-fallback");
  } finally {
    result.errors = errors;
    await browser.close();
    fs.rmSync(path.dirname(wav), { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
