// The console served by a gateway that wants an API key, in headless Chromium; prints one
// JSON line. Usage: node gateway.cjs <playwright-core dir> <page url> <chromium> <out dir> <key>
// The page asks for the key; a wrong one is refused with the gateway's reason; the right
// one lists the routing table's Agents (with the console's summaries the table carries); a
// typed line gets its answer through the gateway, and the workflow graph follows it.
"use strict";
const { PATIENCE, LINES, pageRead, agentsRead, graphRead, shot, say, replied, connect } = require("./helpers.cjs");
const [playwrightDir, url, executablePath, outDir, key] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

async function main() {
  const browser = await chromium.launch({
    executablePath, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const result = {};
  const errors = [];
  try {
    const page = await browser.newPage();
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
