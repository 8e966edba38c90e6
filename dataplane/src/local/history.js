"use strict";
// History: past sessions from the conversation record (`GET /v1/sessions`, newest first),
// each opening as a read-only transcript (`GET /v1/sessions/{id}`) drawn with the same
// bubbles, dividers and cards as the live session. Where the gateway keeps no record the
// panel says so.

const past = (() => {
  const list = $("history");
  const viewer = new Transcript($("past-log"));
  let refreshing = null;

  const when = (ms) => (ms ? new Date(ms).toLocaleString() : "–");

  async function refresh() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const response = await fetch("/v1/sessions?limit=50");
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
      const response = await fetch(`/v1/sessions/${encodeURIComponent(id)}`);
      const record = await response.json();
      if (!response.ok) throw new Error(record.message || response.status);
      const s = record.summary || record;
      $("past-summary").textContent = `${when(s.started_at)} · ${(s.agents || []).map(agentName).join(" → ")} · `
        + `${s.turns} turns · ${s.input_tokens} in / ${s.output_tokens} out tokens · ${s.outcome}`;
      draw(record.events || []);
      $("past").dataset.loaded = id;
    } catch (e) {
      $("past-summary").textContent = `Cannot open the session: ${e}`;
    }
  }

  /** Draws recorded events as the live page drew them. */
  function draw(events) {
    let usage = { input: 0, output: 0, cost: 0 };
    let last = null;
    let turns = 0;
    for (const { agent, kind, data } of events) {
      const d = data || {};
      switch (kind) {
        case "user": viewer.user(d.text); break;
        case "assistant": viewer.assistant(agent, d.text); break;
        case "tool_start": viewer.toolStart(d.tool_use_id, d.name, d.input); break;
        case "tool_complete": viewer.toolComplete(d.tool_use_id, d.name, d.result, d.cached, d.duration_ms ?? 0); break;
        case "tool_error": viewer.toolError(d.tool_use_id, d.name, d.kind, d.message, d.duration_ms ?? 0); break;
        case "handoff": viewer.handoff(d.from, d.to, d.reason, d.kind); break;
        case "consent_request": viewer.consent(d.tool_use_id, d.name, d.description, d.input, null); break;
        case "consent_answer": viewer.consentAnswered(d.tool_use_id, d.approved); break;
        case "memory": viewer.note(`memory ${d.key} = ${JSON.stringify(d.value)}`); break;
        case "workflow": viewer.step(d.from, d.to, d.by); break;
        case "interruption": viewer.interrupted(); break;
        case "error": viewer.note(`${d.code}: ${d.message}`, "error"); break;
        case "usage":
          usage.input += d.input_tokens || 0;
          usage.output += d.output_tokens || 0;
          usage.cost += d.cost_usd || 0;
          break;
        case "turn":
          last = { n: ++turns, firstMs: d.first_reply_ms, turnMs: d.turn_ms, ...usage };
          last.line = viewer.figures(last);
          usage = { input: 0, output: 0, cost: 0 };
          break;
        case "session_start": viewer.note(`session started with ${agentName(agent)}`); break;
        case "session_resumed": viewer.note("session resumed"); break;
        case "session_end": viewer.note(`session ended${d.reason ? `: ${d.reason}` : ""}`); break;
      }
    }
    if (last && (usage.input || usage.output)) {
      // Usage reported just after the last turn completed.
      last.input += usage.input;
      last.output += usage.output;
      last.cost += usage.cost;
      last.line.update();
    }
  }

  $("history-refresh").onclick = () => refresh();
  $("past-close").onclick = () => $("past").close();
  refresh();
  return { refresh, open };
})();

window.past = past;
