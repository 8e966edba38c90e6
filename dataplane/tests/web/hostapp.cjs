// The host app's part of a conversation in the console (hostapp.rs says what is checked),
// in headless Chromium; prints one JSON line. Usage:
//   node hostapp.cjs <playwright-core dir> <page url> <microphone wav> <chromium> <out dir>
//        <outage switch file> <outage message>
// 1. text, through to banking: the recent transactions as a card; then four client tool
//    calls — answered, answered off its schema, "Cannot do it", unanswered;
// 2. voice: idv's line played whole, drawn live, then in the session opened from History;
// 3. the outage switch file written while a conversation is under way, a new conversation
//    started meanwhile, the file removed.
"use strict";
const fs = require("fs");
const { PATIENCE, LINES, shot, say, replied, open, connect } = require("./helpers.cjs");
const [playwrightDir, url, wav, executablePath, outDir, switchFile, closedMessage] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

/** What the card in the conversation shows (runs in the page). */
function cardRead() {
  const card = document.querySelector("#log .display-card");
  const a = card.querySelector("a");
  return {
    title: card.querySelector("h3").textContent,
    text: card.querySelector("p")?.textContent ?? null,
    fields: [...card.querySelectorAll(".field")].map((f) => [f.querySelector("dt").textContent, f.querySelector("dd").textContent]),
    link: a && { href: a.getAttribute("href"), text: a.textContent, rel: a.rel, target: a.target },
    images: document.querySelectorAll("#log img").length,
    pwned: window.pwned !== undefined,
    said: [...document.querySelectorAll("#log .msg.assistant[data-agent=banking]")].map((b) => b.textContent).join(" | "),
  };
}

/** The `n`th client tool card has an outcome, and a turn completed after it (runs in the page). */
function settledAfter(n) {
  const card = document.querySelectorAll("#log .client-tool[data-tool=pick_account]")[n];
  if (!card || !card.dataset.outcome) return false;
  for (let e = card.nextElementSibling; e; e = e.nextElementSibling) if (e.matches(".figures")) return true;
  return false;
}

/** Asks which account; `answer(card)` answers the `n`th call (or does not); what it showed. */
async function clientCall(page, n, answer) {
  await page.getByLabel("Message").fill("Which account is this about?");
  await page.keyboard.press("Enter");
  const card = page.locator("#log .client-tool[data-tool=pick_account]").nth(n);
  await card.waitFor({ timeout: PATIENCE });
  const shown = Date.now();
  await answer(card);
  await page.waitForFunction((i) => document.querySelectorAll("#log .client-tool[data-tool=pick_account]")[i]?.dataset.outcome,
    n, { timeout: PATIENCE });
  const waitedMs = Date.now() - shown;
  await page.waitForFunction(settledAfter, n, { timeout: PATIENCE });
  return page.evaluate(([i, waited]) => {
    const c = document.querySelectorAll("#log .client-tool[data-tool=pick_account]")[i];
    const replies = [];
    for (let e = c.nextElementSibling; e && !e.matches(".figures"); e = e.nextElementSibling) {
      if (e.matches(".msg.assistant")) replies.push(e.querySelector(".text").textContent);
    }
    return { outcome: c.dataset.outcome, card: c.textContent, ended: c.querySelector(".answered")?.textContent ?? "",
      reply: replies.join(" | "), waitedMs: waited };
  }, [n, waitedMs]);
}

/** A text conversation through to banking: the card, then the client tool calls. */
async function cardAndTools(context, result, errors) {
  const page = await open(context, url, errors);
  await connect(page);
  await say(page, LINES[0], replied, ["idv", "sort code"]);
  await say(page, LINES[1], replied, ["idv", "verified"]);
  await say(page, "Show me my recent transactions", replied, ["banking", "on your screen"]);
  result.card = await page.evaluate(cardRead);
  // The page's own guard, in the same page: a link that is not a web address is no link.
  result.card.notWeb = await page.evaluate(() => {
    const root = document.createElement("div");
    new Transcript(root).display({ title: "t", link: { label: "Click", url: "javascript:alert(1)" } });
    return { links: root.querySelectorAll("a").length, text: root.textContent };
  });
  await shot(page, outDir, "11-card");
  const field = (card) => card.getByLabel("Result of pick_account");
  result.tools = [
    await clientCall(page, 0, async (card) => {
      await field(card).fill('{"account": "12345678"}');
      await card.getByRole("button", { name: "Send result" }).click();
    }),
    await clientCall(page, 1, async (card) => {
      await field(card).fill('{"account": "twelve"}');
      await card.getByRole("button", { name: "Send result" }).click();
    }),
    await clientCall(page, 2, (card) => card.getByRole("button", { name: "Cannot do it" }).click()),
    await clientCall(page, 3, async () => {}),
  ];
  await shot(page, outDir, "12-client-tools");
  await page.close();
}

/** By voice: idv's line played whole, live and from History. */
async function voiceLine(context, result, errors) {
  const line = {};
  const page = await open(context, url, errors);
  await page.getByRole("button", { name: "Start voice" }).click();
  await page.waitForFunction(() => document.querySelector("#log .note.line[data-node=choose]"), null, { timeout: PATIENCE });
  const read = (selector) => page.$eval(selector, (n) => ({ node: n.dataset.node, played: n.dataset.played, text: n.textContent }));
  line.live = await read("#log .note.line[data-node=choose]");
  // Heard: on the WebRTC call (the default), audible in the page; on the WebSocket, scheduled.
  const heard = () => (window.switchboard.call ? window.switchboard.callAudibleMs : window.switchboard.scheduledSamples);
  await page.waitForFunction(heard, null, { timeout: PATIENCE }).catch(() => {});
  line.heard = await page.evaluate(heard);
  line.transport = await page.$eval("#transport", (o) => o.dataset.transport);
  const sessionId = await page.evaluate(() => window.switchboard.sessionId);
  await shot(page, outDir, "13-workflow-line");
  await page.close();
  const viewer = await open(context, url, errors);
  const item = viewer.locator(`#history button[data-session="${sessionId}"]`);
  // The record's writer batches: ask again until the session is listed.
  const deadline = Date.now() + PATIENCE;
  while (!(await item.count())) {
    if (Date.now() > deadline) throw new Error("the voice session never appeared in History");
    await viewer.getByRole("button", { name: "Refresh" }).click();
    await item.waitFor({ timeout: 1000 }).catch(() => {});
  }
  await item.click();
  await viewer.waitForFunction((id) => document.querySelector("#past").dataset.loaded === id
    && document.querySelector("#past-log .note.line"), sessionId, { timeout: PATIENCE });
  line.past = await viewer.$eval("#past-log .note.line", (n) => ({ node: n.dataset.node, played: n.dataset.played, text: n.textContent }));
  await viewer.close();
  result.line = line;
}

/** Writes the outage switch file whole (renamed into place: never read half-written). */
function flip(text) {
  const part = `${switchFile}.part`;
  fs.writeFileSync(part, text);
  fs.renameSync(part, switchFile);
}

/** The outage switch flipped on and off while a conversation is under way. */
async function outage(context, result, errors) {
  const seen = {};
  const page = await open(context, url, errors);
  await connect(page);
  flip(`active: true\nmessage: "${closedMessage}"\n`);
  await page.waitForFunction(() => document.querySelector("#log .notice.outage.on"), null, { timeout: PATIENCE });
  seen.on = await page.textContent("#log .notice.outage.on");
  // A new conversation meanwhile goes to the fallback.
  const other = await open(context, url, errors);
  await other.getByRole("button", { name: "Connect" }).click();
  await other.waitForFunction(() => !document.querySelector("#banner").hidden, null, { timeout: PATIENCE });
  seen.banner = await other.textContent("#banner-text");
  seen.status = await other.textContent("#status");
  await shot(other, outDir, "14-outage-fallback");
  await other.close();
  fs.unlinkSync(switchFile);
  await page.waitForFunction(() => document.querySelector("#log .notice.outage.off"), null, { timeout: PATIENCE });
  seen.off = await page.textContent("#log .notice.outage.off");
  await shot(page, outDir, "15-outage-notices");
  // The conversation under way went on throughout: it answers.
  const before = await page.$$eval("#log .figures", (f) => f.length);
  await say(page, "What are your opening hours?", (n) => document.querySelectorAll("#log .figures").length > n, before);
  seen.goesOn = await page.evaluate(() => window.switchboard.session?.connected === true);
  await page.close();
  result.outage = seen;
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
    await cardAndTools(context, result, errors);
    await voiceLine(context, result, errors);
    await outage(context, result, errors);
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
