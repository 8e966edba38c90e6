"use strict";
// History: past sessions from the conversation record (`GET /v1/sessions`, newest first),
// each opening as a read-only transcript (`GET /v1/sessions/{id}`) drawn with the same
// bubbles, dividers and cards as the live session, and replayable as it happened: its
// events drawn one by one at the moments the record gives (`at_us`), at a chosen speed,
// with Stop. Where the gateway keeps no record the panel says so.

const past = (() => {
  const list = $("history");
  const viewer = new Transcript($("past-log"));
  let refreshing = null;
  let events = []; // the open session's events
  let replay = null; // the replay under way

  const when = (ms) => (ms ? new Date(ms).toLocaleString() : "–");

  async function refresh() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const response = await api("/v1/sessions?limit=50");
        const body = await response.json();
        if (!response.ok) {
          list.replaceChildren();
          $("history-empty").textContent = body.message || `No record (${response.status}).`;
          $("history-empty").hidden = false;
          return;
        }
        const sessions = body.sessions || [];
        list.replaceChildren(...sessions.map(item));
        $("history-empty").textContent = "No recorded sessions.";
        $("history-empty").hidden = sessions.length > 0;
      } catch (e) {
        $("history-empty").textContent = `Cannot read the record: ${e}`;
        $("history-empty").hidden = false;
      } finally {
        refreshing = null;
      }
    })();
    return refreshing;
  }

  function item(s) {
    const agents = (s.agents || []).map(agentName).join(" → ");
    const figures = `${s.turns} turns · ${s.outcome || "open"}${s.cost_usd ? ` · $${s.cost_usd.toFixed(4)}` : ""}`;
    const button = el("button", { type: "button", "data-session": s.id, onclick: () => open(s.id) },
      el("div", { class: "when" }, when(s.started_at)),
      el("div", { class: "meta" }, agents),
      el("div", { class: "meta" }, `${figures}${s.caller ? ` · ${s.caller}` : ""}`));
    return el("li", {}, button);
  }

  async function open(id) {
    viewer.clear();
    $("past-title").textContent = `Session ${id.slice(0, 8)}`;
    $("past-summary").textContent = "loading…";
    $("past").dataset.session = id;
    if (!$("past").open) $("past").showModal();
    try {
      const response = await api(`/v1/sessions/${encodeURIComponent(id)}`);
      const record = await response.json();
      if (!response.ok) throw new Error(record.message || response.status);
      const s = record.summary || record;
      $("past-summary").textContent = `${when(s.started_at)} · ${(s.agents || []).map(agentName).join(" → ")} · `
        + `${s.turns} turns · ${s.input_tokens} in / ${s.output_tokens} out tokens · ${s.outcome}`;
      stopReplay("");
      events = record.events || [];
      draw(events);
      $("replay").disabled = events.length === 0;
      $("past").dataset.loaded = id;
    } catch (e) {
      $("past-summary").textContent = `Cannot open the session: ${e}`;
    }
  }

  /** A fresh tally for drawing one session's events. */
  const tally = () => ({ usage: { input: 0, output: 0, cost: 0 }, last: null, turns: 0 });

  /** Draws one recorded event as the live page drew it. */
  function drawEvent({ agent, kind, data }, t) {
    const d = data || {};
    switch (kind) {
      case "user": viewer.user(d.text); break;
      case "assistant": viewer.assistant(agent, d.text); break;
      case "tool_start": viewer.toolStart(d.tool_use_id, d.name, d.input); break;
      case "tool_complete":
        viewer.toolComplete(d.tool_use_id, d.name, d.result, d.cached, d.duration_ms ?? 0);
        viewer.clientToolEnded(d.tool_use_id, "ok");
        break;
      case "tool_error":
        viewer.toolError(d.tool_use_id, d.name, d.kind, d.message, d.duration_ms ?? 0);
        viewer.clientToolEnded(d.tool_use_id, d.kind, d.message);
        break;
      case "handoff": viewer.handoff(d.from, d.to, d.reason, d.kind); break;
      case "consent_request": viewer.consent(d.tool_use_id, d.name, d.description, d.input, null); break;
      case "consent_answer": viewer.consentAnswered(d.tool_use_id, d.approved); break;
      case "client_tool_call": viewer.clientTool(d.tool_use_id, d.name, d.input, d.timeout_ms, null); break;
      case "display_card": if (d.card) viewer.display(d.card); break;
      case "memory": viewer.note(`memory ${d.key} = ${JSON.stringify(d.value)}`); break;
      case "workflow": viewer.step(d.from, d.to, d.by); break;
      case "workflow_line": viewer.line(d.node, d.text, d.uninterruptible, d.played, d.reason); break;
      case "interruption": viewer.interrupted(); break;
      case "error": viewer.note(`${d.code}: ${d.message}`, "error"); break;
      case "usage":
        t.usage.input += d.input_tokens || 0;
        t.usage.output += d.output_tokens || 0;
        t.usage.cost += d.cost_usd || 0;
        break;
      case "turn":
        t.last = { n: ++t.turns, firstMs: d.first_reply_ms, turnMs: d.turn_ms, ...t.usage };
        t.last.line = viewer.figures(t.last);
        t.usage = { input: 0, output: 0, cost: 0 };
        break;
      case "session_start": viewer.note(`session started with ${agentName(agent)}`); break;
      case "session_resumed": viewer.note("session resumed"); break;
      case "session_end": viewer.note(`session ended${d.reason ? `: ${d.reason}` : ""}`); break;
    }
  }

  /** After the last event: usage reported just after the last turn completed. */
  function finish(t) {
    if (t.last && (t.usage.input || t.usage.output)) {
      t.last.input += t.usage.input;
      t.last.output += t.usage.output;
      t.last.cost += t.usage.cost;
      t.last.line.update();
    }
  }

  /** Draws recorded events as the live page drew them, all at once. */
  function draw(events) {
    const t = tally();
    for (const event of events) drawEvent(event, t);
    finish(t);
  }

  // --- replay: the open session as it happened, paced by its events' timestamps --------
  const speed = () => Number($("replay-speed").value) || 1;
  const offset = (event) => (event.at_us - events[0].at_us) / 1000; // ms into the session

  /** Moves the replay's clock (ms of session time) to now, at the speed it ran at. */
  function tick(r) {
    const now = performance.now();
    r.pos += (now - r.wall) * r.speed;
    r.wall = now;
  }

  function startReplay() {
    stopReplay("");
    if (!events.length) return;
    viewer.clear();
    replay = { i: 0, pos: 0, wall: performance.now(), speed: speed(), tally: tally(), timer: null, shown: [] };
    window.switchboard.replay = { shown: replay.shown, done: false, speed: replay.speed };
    $("replay").disabled = true;
    $("replay-stop").disabled = false;
    $("replay-state").textContent = `replaying at ${replay.speed}×`;
    step();
  }

  function step() {
    const r = replay;
    if (!r) return;
    tick(r);
    while (r.i < events.length && offset(events[r.i]) <= r.pos) {
      drawEvent(events[r.i], r.tally);
      r.shown.push({ kind: events[r.i].kind, at: offset(events[r.i]), pos: r.pos });
      r.i++;
    }
    $("replay-state").textContent = `replaying at ${r.speed}× · ${millis(r.pos)} of ${millis(offset(events[events.length - 1]))}`;
    if (r.i >= events.length) {
      finish(r.tally);
      window.switchboard.replay.done = true;
      stopReplay("replayed");
      return;
    }
    // Look again at least every 250 ms, so a change of speed takes effect at once.
    const wait = (offset(events[r.i]) - r.pos) / r.speed;
    r.timer = setTimeout(step, Math.max(0, Math.min(wait, 250)));
  }

  /** Stops a replay where it is (what was drawn stays). */
  function stopReplay(label = "stopped") {
    if (replay) clearTimeout(replay.timer);
    replay = null;
    $("replay").disabled = events.length === 0;
    $("replay-stop").disabled = true;
    $("replay-state").textContent = label;
  }

  $("replay").onclick = () => startReplay();
  $("replay-stop").onclick = () => stopReplay();
  $("replay-speed").onchange = () => {
    if (!replay) return;
    tick(replay);
    replay.speed = window.switchboard.replay.speed = speed();
  };
  $("past").addEventListener("close", () => stopReplay(""));
  $("history-refresh").onclick = () => refresh();
  $("past-close").onclick = () => $("past").close();
  refresh();
  return { refresh, open };
})();

window.past = past;
