// Drives local mode's web page in a real headless Chromium (playwright-core) and prints
// what happened as one JSON line. Usage:
//   node drive.cjs <playwright-core dir> <page url> <microphone wav> <chromium>
// 0. the agent list: the options a user may pick, and those shown as reached by handoff;
// 1. text: connect to `triage`, type a request, wait for the handoff to `idv`;
// 2. voice: a fresh page, the default agent `triage` (hybrid), start voice with the WAV as
//    the microphone (the request, then the identity details), wait for the handoff to
//    `idv`, the heard transcripts, the identity check, the spoken reply and its playback.
"use strict";
const [playwrightDir, url, wav, executablePath] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

const PATIENCE = 45000;

async function logText(page) {
  return page.$$eval("#log > div", (divs) => divs.map((d) => `${d.className}: ${d.textContent}`));
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
  const result = {};
  try {
    const context = await browser.newContext();
    await context.grantPermissions(["microphone"]);
    // Text.
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
    result.agents = await page.$$eval("#agent option", (os) => os.filter((o) => !o.disabled).map((o) => o.value));
    result.byHandoff = await page.$$eval("#agent option", (os) => os.filter((o) => o.disabled).map((o) => o.value));
    result.selected = await page.$eval("#agent", (s) => s.value);
    await page.selectOption("#agent", "triage");
    await page.click("#connect");
    await page.waitForFunction(() => /triage/.test(document.querySelector("#status").textContent), null, { timeout: PATIENCE });
    await page.waitForFunction(() => !document.querySelector("#text").disabled, null, { timeout: PATIENCE });
    await page.fill("#text", "I'd like to check my balance");
    await page.click("#send");
    await page.waitForFunction(
      () => [...document.querySelectorAll("#log .event")].some((d) => d.textContent.includes("handoff triage → idv")),
      null, { timeout: PATIENCE });
    result.text = await logText(page);
    result.textErrors = errors.slice();
    await page.close();

    // Voice.
    const voice = await context.newPage();
    voice.on("pageerror", (e) => errors.push(String(e)));
    await voice.goto(url);
    await voice.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
    // As a caller: the default agent, triage, which hands over to idv when it hears why.
    if (await voice.$eval("#agent", (s) => s.value) !== "triage") throw new Error("triage is not preselected");
    await voice.click("#mic");
    await voice.waitForFunction(
      () => {
        const s = window.switchboard;
        const log = [...document.querySelectorAll("#log > div")].map((d) => d.textContent).join("\n");
        return s.scheduledSamples > 0 && log.includes("handoff triage → idv") && log.includes("perform_idv_check")
          && /verified/i.test(log);
      },
      null, { timeout: PATIENCE });
    // Let the reply's audio arrive in full before reading the counters.
    await voice.waitForTimeout(1500);
    result.voice = await logText(voice);
    result.counters = await voice.evaluate(() => {
      const s = window.switchboard;
      return {
        framesSent: s.framesSent, audioChunks: s.audioChunks, audioSamples: s.audioSamples,
        scheduledSamples: s.scheduledSamples, events: [...new Set(s.events)],
        playbackState: s.playbackState ? s.playbackState() : null,
      };
    });
    result.errors = errors;
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
