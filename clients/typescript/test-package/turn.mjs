// One text turn through the installed package (run from a fresh project by run.sh): the
// front desk hands a balance question to identity verification, which asks who is calling.
// Args: the session URL, the package's version (the protocol's).
import { readFileSync } from "node:fs";
import { PROTOCOL_VERSION, Session } from "@switchboard/client";

const [url, version] = process.argv.slice(2);
const fail = (why) => {
  console.error(`FAIL: ${why}`);
  process.exit(1);
};
const manifest = "node_modules/@switchboard/client/package.json";
const installed = JSON.parse(readFileSync(manifest, "utf8")).version;
if (installed !== version || PROTOCOL_VERSION !== version) {
  fail(`installed ${installed}, PROTOCOL_VERSION ${PROTOCOL_VERSION}, expected ${version}`);
}
const session = await Session.connect({ url, start: { agent: "triage" } });
const replies = [];
const handoffs = [];
session.on("bidi_transcript_stream", (m) => {
  if (m.role === "assistant" && m.is_final) replies.push(m.text);
});
session.on("handoff", (m) => handoffs.push(`${m.from} -> ${m.to}`));
const done = session.next("bidi_response_complete", (m) => m.stop_reason !== "handoff", 60000);
session.sendText("I'd like to check my balance");
await done;
await session.close();
if (session.agent !== "idv" || !handoffs.includes("triage -> idv") || replies.length === 0) {
  fail(`agent ${session.agent}, handoffs ${JSON.stringify(handoffs)}, replies ${JSON.stringify(replies)}`);
}
console.log(`@switchboard/client ${installed} from its tarball: triage -> idv, "${replies.at(-1)}"`);
