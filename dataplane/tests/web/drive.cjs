// Drives local mode's web console in a real headless Chromium (playwright-core) and prints
// what happened as one JSON line; saves screenshots of the main states in <out dir>. Usage:
//   node drive.cjs <playwright-core dir> <page url> <microphone wav> <chromium> <out dir>
// 0. the agent list: the options a user may pick, and those shown as reached by handoff;
//    the Agents panel (every agent with mode, persona, voice, tools, handoffs), one card
//    opened from the keyboard;
// 1. text: connect to `triage`, type the banking script's three lines (each after the
//    previous turn completed), through triage -> idv -> banking; read the bubbles, dividers,
//    tool cards, memory, the workflow graph after each turn, and per-turn figures;
// 2. history: start a new conversation, open the first one from History, read its
//    read-only transcript; replay it at 1x and stop it part way, then replay it whole at 5x;
// 3. the scenes of scenes.cjs: consent by clicking Allow, voice with an open microphone
//    over the WebSocket and over WebRTC (the default), WebRTC that cannot connect falling
//    back to the WebSocket, push-to-talk on Space, and a connection cut by a TCP relay
//    resumed from the banner.
"use strict";
const { PATIENCE, LINES, pageRead, graphRead, agentsRead, shot, open, connect } = require("./helpers.cjs");
const scenes = require("./scenes.cjs");
const [playwrightDir, url, wav, executablePath, outDir] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

/** The agent list and the Agents panel, one card opened by keyboard. */
async function agentList(page, result) {
  result.agents = await page.$$eval("#agent option", (os) => os.filter((o) => !o.disabled).map((o) => o.value));
  result.byHandoff = await page.$$eval("#agent option", (os) => os.filter((o) => o.disabled).map((o) => o.value));
  result.selected = await page.$eval("#agent", (s) => s.value);
  await page.waitForFunction(() => document.querySelectorAll("#agents details.agent").length > 0, null, { timeout: PATIENCE });
  await page.locator("#agents details.agent[data-agent=banking] summary").focus();
  await page.keyboard.press("Enter");
  result.panel = await page.evaluate(agentsRead);
  result.graphBefore = await page.evaluate(graphRead);
  await shot(page, outDir, "0-agents");
}

/** The banking script typed line by line; the graph read after each turn. */
async function conversation(page, result) {
  result.sessionId = await connect(page);
  result.graphs = [await page.evaluate(graphRead)];
  for (const [i, line] of LINES.entries()) {
    await page.getByLabel("Message").fill(line);
    await page.keyboard.press("Enter");
    // The turn this line starts has completed: its figures line is drawn.
    await page.waitForFunction((n) => document.querySelectorAll("#log .figures").length >= n
      && !document.querySelector("#log .msg.user.pending"), i + 1, { timeout: PATIENCE });
    result.graphs.push(await page.evaluate(graphRead));
  }
  // The last turn ends with banking's answer after its check_balance tool.
  await page.waitForFunction(() => [...document.querySelectorAll("#log .msg.assistant")]
    .some((b) => b.dataset.agent === "banking" && !b.classList.contains("streaming") && /balance/i.test(b.textContent)),
  null, { timeout: PATIENCE });
  // Memory is shown once the gateway redacted it.
  await page.waitForFunction(() => document.querySelector("#memory tr[data-key=verifiedUser]:not(.pending)"), null, { timeout: PATIENCE });
  result.text = await page.evaluate(pageRead, "#log");
  result.memory = await page.$$eval("#memory tr", (rows) => rows.map((r) => [r.dataset.key, r.cells[1].textContent]));
  result.now = await page.evaluate(() => ({
    agent: document.querySelector("#now-agent").textContent,
    node: document.querySelector("#now-node").textContent,
    path: document.querySelector("#now-path").textContent,
    tokens: document.querySelector("#now-tokens").textContent,
    state: document.querySelector("#state").dataset.state,
  }));
  result.graph = await page.evaluate(graphRead);
  result.turns = await page.$$eval("#turns tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  result.price = await page.evaluate(() => ({ model: window.switchboard.model, price: window.switchboard.prices.get(window.switchboard.model) }));
  // A tool card opens by keyboard.
  const card = page.locator("#log details.tool[data-tool=check_balance] summary");
  await card.focus();
  await page.keyboard.press("Enter");
  result.cardOpened = await page.$eval("#log details.tool[data-tool=check_balance]", (d) => d.open);
  await shot(page, outDir, "1-conversation");
  // A phone-sized screen: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  result.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  result.phoneGraphWidth = (await page.evaluate(graphRead)).width;
  await shot(page, outDir, "2-phone");
  await page.setViewportSize({ width: 1280, height: 900 });
}

/** History: a new conversation, then the first one from the record, read and replayed. */
async function history(page, result) {
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
  result.past = await page.evaluate(pageRead, "#past-log");
  result.pastSummary = await page.textContent("#past-summary");
  await shot(page, outDir, "3-history");
  // Replay at 1x, stopped after a second: part of the session, and nothing more after Stop.
  const replay = {};
  await page.selectOption("#replay-speed", "1");
  await page.getByRole("button", { name: "Replay" }).click();
  await page.waitForTimeout(1000);
  await page.getByRole("button", { name: "Stop" }).click();
  replay.stopped = await page.evaluate(() => ({ ...window.switchboard.replay, shown: window.switchboard.replay.shown.length }));
  replay.stoppedItems = (await page.evaluate(pageRead, "#past-log")).length;
  await page.waitForTimeout(1000);
  replay.laterItems = (await page.evaluate(pageRead, "#past-log")).length;
  await shot(page, outDir, "3b-replay-stopped");
  // Replay at 5x to the end: the same transcript, no event drawn before its time.
  await page.selectOption("#replay-speed", "5");
  const started = Date.now();
  await page.getByRole("button", { name: "Replay" }).click();
  await page.waitForFunction(() => window.switchboard.replay.done, null, { timeout: PATIENCE });
  replay.wallMs = Date.now() - started;
  replay.shown = await page.evaluate(() => window.switchboard.replay.shown);
  replay.items = await page.evaluate(pageRead, "#past-log");
  replay.state = await page.textContent("#replay-state");
  result.replay = replay;
  await page.keyboard.press("Escape");
  result.pastClosed = await page.waitForFunction(() => !document.querySelector("#past").open, null, { timeout: 5000 })
    .then(() => true, () => false);
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
    const page = await open(context, url, errors);
    await agentList(page, result);
    await page.selectOption("#agent", "triage");
    await conversation(page, result);
    await history(page, result);
    await page.close();
    result.dispute = await scenes.consent(context, url, outDir, errors);
    result.voice = await scenes.openMic(context, url, outDir, errors);
    result.webrtc = await scenes.webrtcVoice(context, url, outDir, errors);
    result.fallback = await scenes.webrtcFallback(context, url, outDir, errors);
    result.ptt = await scenes.pushToTalk(context, url, outDir, errors);
    result.reconnect = await scenes.reconnect(context, url, outDir, errors);
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
