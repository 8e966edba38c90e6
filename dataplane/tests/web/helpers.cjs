// Helpers the console's browser scenes share: reading what a transcript, the workflow graph
// and the Agents panel show (functions run in the page), screenshots, typing a line and
// waiting, opening a page on a fresh connection.
"use strict";
const path = require("path");

const PATIENCE = 45000;
const LINES = [
  "I'd like to check my balance",
  "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
  "My balance please",
];

/** What a transcript element shows, for the test's assertions (runs in the page). */
function pageRead(selector) {
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

/** What the workflow graph shows (runs in the page). */
function graphRead() {
  const svg = document.querySelector("#workflow");
  const nodes = [...svg.querySelectorAll("g.node")];
  return {
    agent: svg.dataset.agent || null,
    workflow: svg.dataset.workflow || null,
    nodes: nodes.map((n) => n.dataset.node),
    current: nodes.filter((n) => n.classList.contains("current")).map((n) => n.dataset.node),
    visited: nodes.filter((n) => n.classList.contains("visited")).map((n) => n.dataset.node),
    edges: [...svg.querySelectorAll("path.edge")].map((e) => `${e.dataset.from}>${e.dataset.to}`),
    taken: [...svg.querySelectorAll("path.edge.taken")].map((e) => `${e.dataset.from}>${e.dataset.to}`),
    title: svg.querySelector("title")?.textContent || "",
    caption: document.querySelector("#workflow-caption").textContent,
    width: svg.getBoundingClientRect().width,
  };
}

/** What the Agents panel shows (runs in the page). */
function agentsRead() {
  return [...document.querySelectorAll("#agents details.agent")].map((d) => ({
    name: d.dataset.agent,
    mode: d.dataset.mode,
    meta: d.querySelector("summary .meta").textContent,
    tools: [...d.querySelectorAll(".tools li")].map((li) => li.dataset.tool),
    facts: Object.fromEntries([...d.querySelectorAll("dt")].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])),
    description: d.querySelector(".description")?.textContent || null,
    open: d.open,
  }));
}

async function shot(page, outDir, name) {
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

/** A new page at `url` with its agents listed; page errors go to `errors`. */
async function open(context, url, errors) {
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll("#agent option").length > 0, null, { timeout: PATIENCE });
  return page;
}

/** Clicks Connect and waits for the session to start. */
async function connect(page) {
  await page.getByRole("button", { name: "Connect" }).click();
  await page.waitForFunction(() => window.switchboard.sessionId && !document.querySelector("#text").disabled,
    null, { timeout: PATIENCE });
  return page.evaluate(() => window.switchboard.sessionId);
}

module.exports = { PATIENCE, LINES, pageRead, graphRead, agentsRead, shot, say, replied, open, connect };
