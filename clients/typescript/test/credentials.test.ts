// Credentials against a real `switchboard gateway` with an API keys file: without a key and
// with a wrong one the gateway refuses the session (4401, its own codes); with the right key,
// sent as `Authorization: Bearer`, the session passes authentication and is refused only
// because the gateway's (empty) routing table has no such agent (4404). The gateway's
// refusals are logged with the sessions' messages and checked against the schema.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Credentials, SessionRefused } from "../dist/index.js";
import { type Gateway, connect, startGateway } from "./harness.js";

let gateway: Gateway;
before(async () => {
  gateway = await startGateway();
});
after(async () => {
  await gateway?.stop();
});

async function refusal(credentials?: Credentials): Promise<SessionRefused> {
  try {
    await connect({ url: gateway.url, start: { agent: "triage" }, ...(credentials ? { credentials } : {}) });
  } catch (error) {
    assert.ok(error instanceof SessionRefused, String(error));
    return error;
  }
  throw new Error("the gateway opened a session");
}

test("the gateway takes the API key as Authorization: Bearer", async () => {
  // Refused before the gateway reads the session_start, it closes at once: the unread start
  // makes its socket reset, which can beat the close frame (1006) and even the bidi_error.
  // Whatever arrived must be this refusal.
  const refusedAs = (refused: SessionRefused, error: string) => {
    assert.ok(refused.code === 4401 || refused.code === 1006, `closed ${refused.code}`);
    if (refused.code === 4401 || refused.error) assert.equal(refused.error?.code, error);
  };
  refusedAs(await refusal(), "missing_key");
  refusedAs(await refusal({ apiKey: "not-the-key" }), "unknown_key");
  const right = await refusal({ apiKey: gateway.apiKey });
  assert.deepEqual([right.code, right.error?.code], [4404, "unknown_agent"], "authenticated, then routed");
});
