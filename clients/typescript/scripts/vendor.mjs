// Writes the client, compiled to browser ES modules by tsc, into the web console
// (dataplane/console/ui/client/), which compiles those files into the `switchboard` binary
// and serves them at /ui/client/*.js: the console speaks the session protocol through this
// package, with no build step at cargo time and nothing fetched at run time.
// `node scripts/vendor.mjs --check` compiles into a temporary folder instead and fails when
// the committed copy differs from it by one byte, or by a file (the tests run it).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..");
const target = join(pkg, "../../dataplane/console/ui/client");
const check = process.argv.includes("--check");

/** The compiled modules, name to text, each with a line saying where it comes from. */
function compile() {
  const out = mkdtempSync(join(tmpdir(), "switchboard-client-vendor-"));
  try {
    const tsc = join(pkg, "node_modules/.bin/tsc");
    execFileSync(tsc, ["-p", join(pkg, "tsconfig.json"), "--outDir", out, "--declaration", "false"], { stdio: "inherit" });
    const files = new Map();
    for (const name of readdirSync(out).filter((n) => n.endsWith(".js")).sort()) {
      const source = `clients/typescript/src/${name.replace(/\.js$/, ".ts")}`;
      const header = `// Generated from ${source} by \`npm run vendor\` (tsc): do not edit; the client's tests fail when it differs.\n`;
      files.set(name, header + readFileSync(join(out, name), "utf8"));
    }
    return files;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const want = compile();
const have = new Map(readdirSync(target).filter((n) => n.endsWith(".js")).map((n) => [n, readFileSync(join(target, n), "utf8")]));
if (check) {
  const differ = [...new Set([...want.keys(), ...have.keys()])].filter((n) => want.get(n) !== have.get(n));
  if (differ.length) {
    console.error(`dataplane/console/ui/client/ differs from clients/typescript/src/ (${differ.join(", ")}): run \`npm run vendor\` in clients/typescript`);
    process.exit(1);
  }
} else {
  for (const name of have.keys()) if (!want.has(name)) rmSync(join(target, name));
  for (const [name, text] of want) writeFileSync(join(target, name), text);
  console.error(`wrote ${want.size} modules to dataplane/console/ui/client/`);
}
