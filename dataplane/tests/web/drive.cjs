// Drives local mode's web console in a real headless Chromium (playwright-core) and prints
// what happened as one JSON line; saves screenshots of the main states in <out dir>. Usage:
//   node drive.cjs <playwright-core dir> <page url> <microphone wav> <chromium> <out dir>
// 0. the agent list: the options a user may pick, and those shown as reached by handoff;
// 1. text: connect to `triage`, type the banking script's three lines (each after the
//    previous turn completed), through triage -> idv -> banking; read the bubbles, dividers,
//    tool cards, memory, workflow path and per-turn figures;
// 2. history: start a new conversation, open the first one from History, read its
//    read-only transcript;
// 2b. consent: a fresh conversation to disputes; open_dispute's consent answered by
//    clicking Allow;
// 3. voice: a fresh page, the default agent `triage` (hybrid), start voice with the WAV as
//    the microphone (the request, then the identity details), wait for the handoff to
//    `idv`, the heard transcripts, the identity check, the spoken reply and its playback.
"use strict";
const path = require("path");
const [playwrightDir, url, wav, executablePath, outDir] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

const PATIENCE = 45000;
const LINES = [
  "I'd like to check my balance",
  "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
  "My balance please",
];

/** What a transcript element shows, for the test's assertions (runs in the page). */
function page_read(selector) {
  const root = document.querySelector(selector);
  return [...root.children].map((n) => {
    if (n.matches(".msg")) {
      return { kind: n.classList.contains("user") ? "user" : "assistant", agent: n.dataset.agent || null,
        text: n.querySelector(".text").textContent, pending: n.classList.contains("pending") };
    }
    if (n.matches(".divider")) return { kind: "handoff", from: n.dataset.from, to: n.dataset.to, text: n.textContent };
    if (n.matches(".tool")) {
      return { kind: "tool", name: n.dataset.tool, status: n.querySelector(".status").textContent,
        done: n.classList.contains("ok"), text: n.textContent };
    }
    if (n.matches(".figures")) return { kind: "figures", text: n.textContent };
    return { kind: n.className, text: n.textContent };
  });
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(outDir, `${name}.png`), fullPage: true });
}

/** Types `line` and waits until `done` (a page function of `arg`) holds. */
async function say(page, line, done, arg) {
  await page.getByLabel("Message").fill(line);
  await page.keyboard.press("Enter");
  await page.waitForFunction(done, arg, { timeout: PATIENCE });
}

/** A reply from `agent` matching `pattern` is shown, complete (runs in the page). */
function replied([agent, pattern]) {
  return [...document.querySelectorAll("#log .msg.assistant")].some((b) => b.dataset.agent === agent
    && !b.classList.contains("streaming") && new RegExp(pattern, "i").test(b.textContent));
}

/** A dispute answered by clicking Allow. (Resuming a dropped connection is not driven here:
 * a close frame from the page ends the session, and Chromium's offline emulation leaves an
 * open WebSocket up, so the page cannot drop its own connection as a network would.) */
async function consent(context, errors) {
  const result = {};
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
  await page.getByRole("button", { name: "Connect" }).click();
  await page.waitForFunction(() => window.switchboard.sessionId && !document.querySelector("#text").disabled,
    null, { timeout: PATIENCE });
  await say(page, "I don't recognise a payment on my account", replied, ["idv", "sort code"]);
  await say(page, LINES[1], replied, ["idv", "verified"]);
  await say(page, "I want to dispute a payment", replied, ["disputes", "dispute payment"]);
  await page.getByLabel("Message").fill("dispute payment tx-1003");
  await page.keyboard.press("Enter");
  const allow = page.getByRole("group", { name: "Consent for open_dispute" }).getByRole("button", { name: "Allow" });
  await allow.waitFor({ timeout: PATIENCE });
  await shot(page, "5-consent");
  await allow.click();
  await page.waitForFunction(replied, ["disputes", "dispute is open"], { timeout: PATIENCE });
  result.consent = await page.textContent("#log .consent");
  result.disputeCard = await page.textContent("#log .tool[data-tool=open_dispute]");
  result.log = await page.evaluate(page_read, "#log");
  await page.close();
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
  const result = {};
  const errors = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(["microphone"]);
    // Text.
    const page = await context.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
    result.agents = await page.$$eval("#agent option", (os) => os.filter((o) => !o.disabled).map((o) => o.value));
    result.byHandoff = await page.$$eval("#agent option", (os) => os.filter((o) => o.disabled).map((o) => o.value));
    result.selected = await page.$eval("#agent", (s) => s.value);
    await page.selectOption("#agent", "triage");
    await page.getByRole("button", { name: "Connect" }).click();
    await page.waitForFunction(() => window.switchboard.sessionId && !document.querySelector("#text").disabled,
      null, { timeout: PATIENCE });
    result.sessionId = await page.evaluate(() => window.switchboard.sessionId);
    for (const [i, line] of LINES.entries()) {
      await page.getByLabel("Message").fill(line);
      await page.keyboard.press("Enter");
      // The turn this line starts has completed: its figures line is drawn.
      await page.waitForFunction((n) => document.querySelectorAll("#log .figures").length >= n
        && !document.querySelector("#log .msg.user.pending"), i + 1, { timeout: PATIENCE });
    }
    // The last turn ends with banking's answer after its check_balance tool.
    await page.waitForFunction(() => [...document.querySelectorAll("#log .msg.assistant")]
      .some((b) => b.dataset.agent === "banking" && !b.classList.contains("streaming") && /balance/i.test(b.textContent)),
      null, { timeout: PATIENCE });
    await page.waitForFunction(() => document.querySelector("#memory tr[data-key=verifiedUser]"), null, { timeout: PATIENCE });
    result.text = await page.evaluate(page_read, "#log");
    result.memory = await page.$$eval("#memory tr", (rows) => rows.map((r) => [r.dataset.key, r.cells[1].textContent]));
    result.now = await page.evaluate(() => ({
      agent: document.querySelector("#now-agent").textContent,
      node: document.querySelector("#now-node").textContent,
      path: document.querySelector("#now-path").textContent,
      tokens: document.querySelector("#now-tokens").textContent,
      state: document.querySelector("#state").dataset.state,
    }));
    result.turns = await page.$$eval("#turns tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
    // A tool card opens by keyboard.
    const card = page.locator("#log details.tool[data-tool=check_balance] summary");
    await card.focus();
    await page.keyboard.press("Enter");
    result.cardOpened = await page.$eval("#log details.tool[data-tool=check_balance]", (d) => d.open);
    await shot(page, "1-conversation");
    // A phone-sized screen: nothing wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    result.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(page, "2-phone");
    await page.setViewportSize({ width: 1280, height: 900 });

    // History: a new conversation, then the first one from the record.
    await page.getByRole("button", { name: "New conversation" }).first().click();
    await page.waitForFunction((old) => window.switchboard.sessionId && window.switchboard.sessionId !== old,
      result.sessionId, { timeout: PATIENCE });
    const item = page.locator(`#history button[data-session="${result.sessionId}"]`);
    // The record's writer batches: ask again until the session is listed.
    const deadline = Date.now() + PATIENCE;
    while (!(await item.count())) {
      if (Date.now() > deadline) throw new Error("the first session never appeared in History");
      await page.getByRole("button", { name: "Refresh" }).click();
      await item.waitFor({ timeout: 1000 }).catch(() => {});
    }
    result.historyItem = await item.textContent();
    await item.click();
    await page.waitForFunction((id) => document.querySelector("#past").dataset.loaded === id
      && document.querySelectorAll("#past-log .tool").length > 0, result.sessionId, { timeout: PATIENCE });
    result.past = await page.evaluate(page_read, "#past-log");
    result.pastSummary = await page.textContent("#past-summary");
    await shot(page, "3-history");
    await page.keyboard.press("Escape");
    result.pastClosed = await page.waitForFunction(() => !document.querySelector("#past").open, null, { timeout: 5000 })
      .then(() => true, () => false);
    await page.close();

    result.dispute = await consent(context, errors);

    // Voice.
    const voice = await context.newPage();
    voice.on("pageerror", (e) => errors.push(String(e)));
    await voice.goto(url);
    await voice.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
    // As a caller: the default agent, triage, which hands over to idv when it hears why.
    if (await voice.$eval("#agent", (s) => s.value) !== "triage") throw new Error("triage is not preselected");
    result.voiceDefaults = await voice.evaluate(() => ["aec", "ns", "agc"].map((id) => document.getElementById(id).checked));
    if (process.env.SWITCHBOARD_WEB_RAW_MIC) {
      for (const id of ["#aec", "#ns", "#agc"]) await voice.uncheck(id);
    }
    await voice.getByRole("button", { name: "Start voice" }).click();
    await voice.waitForFunction(
      () => {
        const s = window.switchboard;
        const log = document.querySelector("#log");
        return s.scheduledSamples > 0 && log.querySelector(".divider[data-from=triage][data-to=idv]")
          && log.querySelector(".tool.ok[data-tool=perform_idv_check]")
          && [...log.querySelectorAll(".msg.assistant[data-agent=idv]")].some((b) => /verified/i.test(b.textContent));
      },
      null, { timeout: PATIENCE });
    // Let the reply's audio arrive in full before reading the counters.
    await voice.waitForFunction(() => {
      const s = window.switchboard;
      const settled = s.lastAudio === s.audioSamples;
      s.lastAudio = s.audioSamples;
      return settled && document.querySelectorAll("#log .figures").length >= 2;
    }, null, { polling: 700, timeout: PATIENCE });
    result.voice = await voice.evaluate(page_read, "#log");
    result.counters = await voice.evaluate(() => {
      const s = window.switchboard;
      return {
        framesSent: s.framesSent, audioChunks: s.audioChunks, audioSamples: s.audioSamples,
        scheduledSamples: s.scheduledSamples, events: [...new Set(s.events)],
        playbackState: voice.playbackState(), micSettings: s.micSettings,
      };
    });
    await shot(voice, "4-voice");
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
