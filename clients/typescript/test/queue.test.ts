// A session the gateway queues for a slot of the model quota waits for its turn past the
// client's start timeout, against a real `switchboard local` whose pool allows one session.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import type { ServerMessageOf } from "../dist/index.js";
import { type Local, connect, create, startLocal } from "./harness.js";

describe("a full model quota", () => {
  let local: Local;
  before(async () => {
    // The Example Bank's Agents run in `default/us-east-1`: one live session at a time.
    local = await startLocal(["--capacity-quota", "default/us-east-1=1", "--capacity-poll-ms", "50"]);
  });
  after(async () => {
    await local?.stop();
  });

  test("a queued session waits past its start timeout and starts when the slot frees", async () => {
    const first = await connect({ url: local.url });
    const second = create({ url: local.url, startTimeoutMs: 1500 });
    const queued: ServerMessageOf<"bidi_session_queued">[] = [];
    second.on("message", (m) => {
      if (m.type === "bidi_session_queued") queued.push(m);
    });
    let started = false;
    const starting = second.start().then(() => {
      started = true;
    });
    const place = await second.next("bidi_session_queued");
    assert.equal(place.position, 1, "first in line");
    assert.ok(place.message && place.message.length > 0, "a hold message to show");
    // Three start timeouts later it still waits, its place kept.
    await new Promise((resolve) => setTimeout(resolve, 4500));
    assert.equal(started, false, "not started while the slot is held");
    await first.close();
    await starting;
    assert.equal(second.agent, "triage");
    assert.ok(queued.length >= 1);
    const closed = await second.close();
    assert.equal(closed.code, 1000);
  });
});
