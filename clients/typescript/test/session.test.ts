// The client against a real `switchboard local` of examples/banking: a text conversation
// through two handoffs to a balance, a tool call with consent, a resume after the network
// dropped (by itself, and when asked: a page's Reconnect), the server's specific errors for bad messages, refusals, a voice turn with
// binary audio both ways, and closing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  type AudioChunk,
  type ServerMessage,
  type Session,
  SessionRefused,
  type ServerMessageOf,
  floatToPcm16,
} from "../dist/index.js";
import { LINES, type Local, connect, create, relay, startLocal } from "./harness.js";

// The sessions are independent: they run at once, against one local mode.
describe("against switchboard local", { concurrency: true }, () => {
  let local: Local;
  before(async () => {
    local = await startLocal();
  });
  after(async () => {
    await local?.stop();
  });

  /** Every message the session receives from now on. */
  function record(session: Session): ServerMessage[] {
    const seen: ServerMessage[] = [];
    session.on("message", (message) => seen.push(message));
    return seen;
  }

  /** Sends a line and waits for the turn that answers it (through any handoffs). */
  async function say(session: Session, text: string): Promise<ServerMessageOf<"bidi_response_complete">> {
    const done = session.next("bidi_response_complete", (m) => m.stop_reason !== "handoff");
    session.sendText(text);
    return done;
  }

  const replies = (seen: ServerMessage[]) =>
    seen
      .filter((m): m is ServerMessageOf<"bidi_transcript_stream"> => m.type === "bidi_transcript_stream")
      .filter((m) => m.role === "assistant" && m.is_final)
      .map((m) => m.text);

  test("a text conversation goes through two handoffs to the balance", async () => {
    const session = await connect({ url: local.url });
    assert.equal(session.agent, "triage");
    assert.match(session.sessionId, /^gw-/);
    assert.ok(session.resumeToken, "local mode's gateway gives a resume token");
    const seen = record(session);
    const id = session.sendText(LINES.balance, "first-line");
    await session.next("bidi_response_complete", (m) => m.stop_reason !== "handoff");
    const echoed = seen.find((m) => m.type === "bidi_transcript_stream" && m.role === "user");
    assert.equal(echoed?.type === "bidi_transcript_stream" && echoed.input_id, id, "the line comes back with its id");
    await say(session, LINES.details);
    assert.equal(session.agent, "idv");
    await say(session, LINES.myBalance);
    assert.equal(session.agent, "banking");

    const handoffs = seen.filter((m): m is ServerMessageOf<"handoff"> => m.type === "handoff");
    assert.deepEqual(
      handoffs.map((h) => [h.from, h.to, h.kind]),
      [["triage", "idv", "transfer"], ["idv", "banking", "transfer"]],
    );
    assert.deepEqual(
      seen.filter((m) => m.type === "bidi_connection_start").map((m) => (m as ServerMessageOf<"bidi_connection_start">).agent),
      ["idv", "banking"],
    );
    const verified = seen.find((m) => m.type === "memory_update" && m.key === "verifiedUser");
    assert.ok(verified, "verifiedUser is set");
    const balance = seen.find((m) => m.type === "tool_complete" && m.name === "check_balance");
    assert.equal(balance?.type === "tool_complete" && (balance.result as { balance: number }).balance, 1234.56);
    assert.ok(replies(seen).some((r) => r.includes("1234.56")), `the balance is said: ${replies(seen).join(" | ")}`);
    const closed = await session.close();
    assert.equal(closed.code, 1000);
    assert.throws(() => session.sendText("anyone?"), /over/);
  });

  test("a tool that needs consent runs once the caller allows it", async () => {
    const session = await connect({ url: local.url });
    const seen = record(session);
    await say(session, LINES.unknownPayment);
    await say(session, LINES.details);
    await say(session, LINES.dispute);
    assert.equal(session.agent, "disputes");
    const asked = session.next("consent_request");
    session.sendText(LINES.disputeTx);
    const request = await asked;
    assert.equal(request.name, "open_dispute");
    assert.equal((request.input as { transactionId?: string }).transactionId, "tx-1003");
    const done = session.next("bidi_response_complete", (m) => m.stop_reason === "end_turn");
    session.consent(request.tool_use_id, true);
    await done;
    const opened = seen.find((m) => m.type === "tool_complete" && m.tool_use_id === request.tool_use_id);
    assert.ok(opened, "the consented call completed");
    assert.ok(replies(seen).some((r) => /dispute is open/i.test(r)), replies(seen).join(" | "));
    await session.close();
  });

  test("a dropped connection is resumed: same session, nothing lost, lines sent meanwhile delivered", async () => {
    const cutter = await relay(local.address);
    try {
      const session = await connect({ url: cutter.url, resumePausesMs: [100, 300, 1000, 2000] });
      const seen = record(session);
      await say(session, LINES.balance);
      assert.equal(session.agent, "idv");
      const before = { id: session.sessionId, seq: session.lastSeq ?? 0 };
      const reconnecting = session.next("reconnecting");
      const resumed = session.next("resumed");
      cutter.cut();
      await reconnecting;
      // Typed while the session is away: sent once it is back.
      const answered = session.next("bidi_response_complete", (m) => m.stop_reason === "end_turn");
      session.sendText(LINES.details);
      const back = await resumed;
      assert.equal(back.session_id, before.id, "the same session");
      assert.equal(back.agent, "idv");
      assert.ok((back.seq ?? 0) > before.seq, `numbering goes on: ${back.seq} after ${before.seq}`);
      await answered;
      assert.ok(seen.some((m) => m.type === "memory_update" && m.key === "verifiedUser"), "the line sent while away was taken up");
      await say(session, LINES.myBalance);
      assert.ok(replies(seen).some((r) => r.includes("1234.56")), "memory kept: the balance without verifying again");
      assert.equal(cutter.connections, 2, "one resume");
      await session.close();
    } finally {
      cutter.close();
    }
  });

  test("with auto-resume off a dropped session ends; resumeFrom resumes it when asked: same session, nothing lost", async () => {
    const cutter = await relay(local.address);
    try {
      const first = create({ url: cutter.url, resumePausesMs: [] });
      // Subscribed before it starts: the session's first message is heard too.
      const started = first.next("bidi_connection_start");
      assert.equal(first.connected, false, "not connected before start");
      await first.start();
      assert.equal((await started).agent, "triage");
      assert.equal(first.connected, true);
      await say(first, LINES.balance);
      await say(first, LINES.details);
      assert.equal(first.agent, "idv");
      const closed = first.closed();
      let reconnecting = false;
      first.on("reconnecting", () => (reconnecting = true));
      cutter.cut();
      const ended = await closed;
      assert.equal(ended.code, 1006, "a dropped connection, not resumed by itself");
      assert.equal(reconnecting, false);
      assert.equal(first.connected, false);
      const from = { resumeToken: first.resumeToken ?? "", lastSeq: first.lastSeq ?? 0 };
      assert.ok(from.resumeToken && from.lastSeq > 0, `where it left off: ${JSON.stringify(from)}`);
      assert.throws(() => first.sendText("too late"), /over/);

      const again = create({ url: cutter.url, resumeFrom: from, resumePausesMs: [] });
      const seen = record(again);
      const resumed = again.next("resumed");
      await again.start();
      const back = await resumed;
      assert.equal(back.session_id, first.sessionId, "the same session");
      assert.equal(again.sessionId, first.sessionId);
      assert.equal(back.agent, "idv", "where it was");
      assert.ok((again.lastSeq ?? 0) > from.lastSeq, `numbering goes on: ${again.lastSeq} after ${from.lastSeq}`);
      await say(again, LINES.myBalance);
      assert.ok(replies(seen).some((r) => r.includes("1234.56")), "memory kept: the balance without verifying again");
      assert.equal(cutter.connections, 2, "the first connection and the one resume");
      await again.close();
      assert.equal(again.connected, false);
    } finally {
      cutter.close();
    }
  });

  test("a started session that is refused emits closed with the refusal, then rejects", async () => {
    const session = create({ url: local.url, start: { agent: "banking" } });
    const closed = session.next("closed");
    await assert.rejects(session.start(), (e: unknown) => e instanceof SessionRefused && e.code === 4403);
    const ended = await closed;
    assert.equal(ended.code, 4403);
    assert.equal(ended.error?.code, "not_exposed");
    await assert.rejects(session.start(), /started already/, "a session starts once");
    // Resuming from a token the server does not know is refused as such, not retried.
    const stale = create({ url: local.url, resumeFrom: { resumeToken: "not-a-token", lastSeq: 3 } });
    const staleClosed = stale.next("closed");
    await assert.rejects(stale.start(), (e: unknown) => e instanceof SessionRefused && e.code === 4410);
    const staleEnd = await staleClosed;
    assert.equal(staleEnd.code, 4410, "closed with the server's code");
    assert.equal(staleEnd.error?.code, "resume_refused");
  });

  test("bad messages get the server's specific errors and the session goes on", async () => {
    const session = await connect({ url: local.url });
    const error = (code: string) => session.next("bidi_error", (m) => m.code === code, 10000);

    let pending = error("invalid_json");
    session.sendRaw("{not json");
    assert.equal((await pending).recoverable, true);

    pending = error("unknown_type");
    session.sendRaw(JSON.stringify({ type: "dance" }));
    assert.match((await pending).message, /dance/);

    pending = error("malformed_message");
    session.sendRaw(JSON.stringify({ type: "bidi_text_input" }));
    await pending;

    pending = error("no_consent_pending");
    session.consent("no-such-call", true);
    await pending;

    pending = error("nothing_to_cancel");
    session.cancel();
    await pending;

    pending = error("unknown_setting");
    session.sendRaw(JSON.stringify({ type: "session_update", speed: 2 }));
    assert.match((await pending).message, /speed/);

    const turn = await say(session, LINES.balance);
    assert.equal(turn.stop_reason, "end_turn", "the session goes on");
    await session.close();
  });

  test("a session the server refuses rejects with its close code and error", async () => {
    await assert.rejects(connect({ url: local.url, start: { agent: "banking" } }), (e: unknown) => {
      assert.ok(e instanceof SessionRefused);
      assert.equal(e.code, 4403);
      assert.equal(e.error?.code, "not_exposed");
      return true;
    });
    await assert.rejects(connect({ url: local.url, start: { agent: "nobody" } }), (e: unknown) => {
      assert.ok(e instanceof SessionRefused);
      assert.equal(e.code, 4404);
      return true;
    });
  });

  /** `ms` of a 440 Hz tone (or silence) as PCM16 at 16 kHz. */
  function tone(ms: number, amplitude: number): Uint8Array {
    const samples = new Float32Array((16000 * ms) / 1000);
    for (let i = 0; i < samples.length; i++) samples[i] = amplitude * Math.sin((2 * Math.PI * 440 * i) / 16000);
    return floatToPcm16(samples);
  }

  test("a voice turn: PCM16 in binary frames, reply audio in the negotiated format", async () => {
    const session = await connect({
      url: local.url,
      start: {
        modalities: ["audio"],
        audio: { output: { encoding: "mulaw", sample_rate: 8000 }, binary_output: true },
      },
    });
    assert.equal(session.mode, "hybrid", "triage is hybrid");
    assert.deepEqual(session.outputFormat, { encoding: "mulaw", sampleRate: 8000 });
    const chunks: AudioChunk[] = [];
    session.on("audio", (chunk) => chunks.push(chunk));
    const heard = session.next("bidi_speech_started");
    const replied = session.next("bidi_response_complete");
    session.sendAudio(tone(1200, 0.5));
    session.sendAudio(tone(2500, 0));
    await heard;
    await replied;
    const bytes = chunks.reduce((n, c) => n + c.data.byteLength, 0);
    assert.ok(bytes > 800, `reply audio arrived: ${bytes} bytes`);
    assert.ok(chunks.every((c) => c.format.encoding === "mulaw" && c.format.sampleRate === 8000));

    const updated = session.next("bidi_session_updated");
    const restarted = session.next("bidi_connection_restart");
    session.update({ voice: "matthew" });
    assert.equal((await updated).voice, "matthew");
    assert.equal((await restarted).reason, "voice_change");
    await session.close();
  });
});
