"use strict";
// The live session: the session protocol spoken by the TypeScript client's Session
// (`client`, loaded by page.html from /ui/client/: the WebSocket, session_start, resume,
// message numbering; text in bidi_text_input with an id, voice as binary PCM16 frames;
// replies as transcripts, audio and events), drawn by render.js; the side panel (agent,
// workflow node, caller, memory, turns); a banner with Reconnect (the client resumes from the
// newest resume token and the last message number, when the user asks: it does not resume
// by itself here) and New conversation when the session fails (an outage fallback's message
// when the agent is in outage mode); the current agent's workflow graph; the gateway's
// credential when it wants one; each turn's cost at the record's prices and the memory redacted as the record is, both asked of the gateway
// (/v1/console/price and /v1/console/redact: its rules, one implementation). Voice controls are in talk.js.
// `window.switchboard` exposes state for tests.

const $ = (id) => document.getElementById(id);
const live = new Transcript($("log"));
const state = Object.assign(window.switchboard, {
  session: null, call: null, transport: null, transportReady: Promise.resolve(null), agents: [], defaultAgent: null, events: [], sessionId: null, agent: null, resumeToken: null,
  lastSeq: null, inputs: 0, turn: null, turns: [], totals: { input: 0, output: 0 }, memory: {}, path: [],
  model: null, prices: new Map(), usages: [], reached: [], memorySeq: {}, audioPlayed: [],
  voiceSession: false, voiceWants: 0, leaving: false, pttMode: false, talking: false, inputEnds: 0, speechEnd: null, lastVoiceAt: null,
  firstAudio: null,
});

function status(text) { $("status").textContent = text; }

// --- the gateway's credential (a cluster's console; local mode asks for none) ---------------
// Kept for this tab only; sent as `Authorization: Bearer` on requests and as `access_token`
// on the session's WebSocket (a browser cannot set headers there), as the gateway expects.
const CREDENTIAL = "switchboard-credential";
const credential = () => sessionStorage.getItem(CREDENTIAL);

/** GET `path` from the gateway, with the credential when one was given. */
function api(path) {
  const key = credential();
  return fetch(path, key ? { headers: { Authorization: `Bearer ${key}` } } : {});
}

/** POST `body` as JSON to `path`, with the credential when one was given. */
function apiPost(path, body) {
  const key = credential();
  const headers = { "Content-Type": "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  return fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
}

/** Asks for an API key or token: `why` is the gateway's word on the last one. */
function askCredential(why) {
  $("login-why").textContent = why || "This gateway needs an API key or a token.";
  $("login").hidden = false;
  $("credential").focus();
}
function sessionState(name, label) {
  $("state").dataset.state = name;
  $("state").textContent = label || name.replace("_", " ");
}

// The agents a session may start with, the default first; then, shown but not selectable,
// those reached only by handoff (gateway.expose: false).
async function loadAgents() {
  const response = await api("/v1/agents");
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) return askCredential(body.message);
  if (!response.ok) throw new Error(`GET /v1/agents answered ${response.status}: ${body.message || ""}`);
  $("login").hidden = true;
  $("agent").replaceChildren();
  state.agents = body.agents;
  agents.show(body);
  state.defaultAgent = body.default;
  const option = (agent) => el("option", { value: agent.name }, `${agent.name} (${agent.mode})`);
  for (const agent of body.agents) {
    const o = option(agent);
    o.selected = agent.name === body.default;
    $("agent").append(o);
  }
  if (body.by_handoff && body.by_handoff.length) {
    const group = el("optgroup", { label: "Reached by handoff" });
    for (const agent of body.by_handoff) group.append(Object.assign(option(agent), { disabled: true }));
    $("agent").append(group);
  }
}

function agentMode() {
  const agent = state.agents.find((a) => a.name === $("agent").value);
  return agent ? agent.mode : "text";
}

/** Clears what the page shows of a session (a new conversation). */
function resetView() {
  live.clear();
  Object.assign(state, { sessionId: null, agent: null, resumeToken: null, lastSeq: null, turn: null, turns: [], memory: {}, path: [],
    fallback: null,
    speechEnd: null, lastVoiceAt: null, firstAudio: null, reached: [], memorySeq: {}, usages: [] });
  state.totals = { input: 0, output: 0 };
  $("memory").tBodies[0].replaceChildren();
  $("turns").tBodies[0].replaceChildren();
  renderMemory();
  renderNow();
}

/** Opens a session; `resume`: the one the banner offers to resume (from where it left off). */
function connect({ withAudio = state.voiceSession, resume = false } = {}) {
  hideBanner();
  const from = resume && state.resumeToken ? { resumeToken: state.resumeToken, lastSeq: state.lastSeq ?? undefined } : null;
  if (state.session) leave();
  if (!resume) resetView();
  const start = {};
  // The default agent is asked for by naming none (it may be reached by handoff too).
  if ($("agent").value !== state.defaultAgent) start.agent = $("agent").value;
  if (withAudio) start.modalities = ["audio", "text"];
  const key = credential();
  // Voice runs over WebRTC unless unticked, falling back to the WebSocket when WebRTC
  // cannot connect; text over the WebSocket. `transportReady`: the call once chosen (null:
  // the WebSocket), for the microphone (talk.js).
  const webrtc = withAudio && $("webrtc").checked;
  let chosen;
  state.transportReady = new Promise((resolve) => { chosen = resolve; });
  const session = client.Session.create({
    url: `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/session`,
    // In the access_token query parameter: a page cannot set headers on a WebSocket.
    ...(key ? { credentials: { token: key } } : {}),
    start,
    ...(from ? { resumeFrom: from } : {}),
    // A dropped connection is the banner's to offer to resume (Reconnect), not resumed unasked.
    resumePausesMs: [],
    ...(webrtc ? {
      webSocket: client.webRtcFirst({
        webrtcUrl: `${location.origin}/v1/webrtc`,
        ...(key ? { credentials: { token: key } } : {}),
        onTransport: (choice) => chooseTransport(session, choice, chosen),
      }),
    } : {}),
  });
  state.session = session;
  state.call = null;
  voice.useCall(null);
  if (webrtc) showTransport("connecting", "WebRTC: connecting…");
  else {
    showTransport("websocket", withAudio ? "WebSocket (WebRTC unticked)" : "WebSocket");
    chosen(null);
  }
  sessionState("connecting", "connecting…");
  session.on("message", (message) => state.session === session && handle(message));
  // The person at the console answers client tool calls (a listener: the client does not
  // answer them with "no handler" by itself).
  session.on("client_tool_call", () => {});
  session.on("audio", (chunk) => state.session === session && voice.play(chunk));
  session.on("closed", (closed) => {
    chosen(null);
    ended(session, closed);
  });
  session.start().then(() => {
    if (state.session !== session) return;
    $("text").disabled = $("send").disabled = false;
    $("new").disabled = false;
    $("mic").disabled = $("talk").disabled = agentMode() === "text";
  }, () => {}); // a session that did not start is `closed` too: ended() shows why
}

/** `session` is over: unless the page left it, the banner says why and offers to resume it
 * (when it has a resume token) or start again. */
function ended(session, { code, reason }) {
  if (state.session !== session) return;
  state.session = null;
  state.call = null;
  voice.useCall(null);
  state.resumeToken = session.resumeToken ?? null;
  state.lastSeq = session.lastSeq ?? null;
  $("text").disabled = $("send").disabled = true;
  stopVoice();
  if (state.leaving) return;
  if (code === 4401) askCredential(reason);
  sessionState("closed");
  status(`closed${reason ? ": " + reason : ""} (${code})`);
  if (state.fallback) showBanner(fallbackWords(state.fallback));
  else showBanner(`The connection closed${reason ? ": " + reason : ""} (code ${code}).`);
  past.refresh();
}

/** Ends the current session on purpose (no banner). */
function leave() {
  const session = state.session;
  state.session = null;
  if (!session) return;
  session.close();
  stopVoice();
  state.call = null;
  voice.useCall(null);
  setTimeout(() => past.refresh(), 500);
}

function showBanner(text) {
  $("banner-text").textContent = text;
  $("reconnect").hidden = !state.resumeToken;
  $("banner").hidden = false;
  ($("reconnect").hidden ? $("restart") : $("reconnect")).focus();
}
function hideBanner() { $("banner").hidden = true; }

/** A new session went to the agent's outage fallback (`bidi_session_fallback`; the socket
 * closes with 4513): the conversation and the banner say what to tell the caller. */
function fallback(m) {
  state.fallback = m;
  live.note(fallbackWords(m), "notice fallback");
}

function fallbackWords(m) {
  const why = m.cause === "switch" ? "is switched into outage mode" : "is failing, so it is in outage mode";
  const retry = m.retry_after_seconds != null ? ` Try again in about ${m.retry_after_seconds} s.` : "";
  const person = m.person ? ` Put the caller through to ${m.person.name} (${m.person.address}).` : "";
  return `${agentName(m.agent)} ${why}: ${m.message}${person}${retry}`;
}

function handle(m) {
  state.events.push(m.type);
  switch (m.type) {
    case "bidi_connection_start":
      state.sessionId = m.session_id;
      state.agent = m.agent;
      reach(m.agent);
      state.model = m.model;
      loadPrice(m.model);
      // For a banner shown before the session ends (a bidi_error that ends it): Reconnect.
      state.resumeToken = state.session?.resumeToken ?? null;
      status(`${m.agent} · ${m.mode} · ${m.model} · session ${m.session_id.slice(0, 8)}`);
      if ($("state").dataset.state === "connecting") sessionState("ready");
      renderNow();
      break;
    case "bidi_transcript_stream":
      if (m.role === "user") {
        if (m.is_final) live.user(m.text, m.input_id);
      } else if (m.is_final) {
        live.assistant(state.agent, m.text);
      } else if (m.delta) {
        firstToken();
        live.delta(state.agent, m.text);
      }
      break;
    case "bidi_response_start":
      voice.newReply();
      // Runtimes count turns per agent; the page counts the session's.
      state.turn = { n: state.turns.length + 1, serverTurn: m.turn, started: performance.now(), firstMs: null, turnMs: null, input: 0, output: 0, usages: [],
        firstAudioMs: state.firstAudio };
      state.firstAudio = null;
      break;
    case "bidi_response_complete": completeTurn(m); break;
    case "bidi_usage": usage(m); break;
    // The audio itself reaches voice.play through the session's `audio` event.
    case "bidi_audio_stream": firstToken(); firstAudio(); break;
    case "bidi_interruption": {
      state.interruptions++;
      // Playback stops at once; the runtime is told how much of the cut reply was heard.
      const played = voice.interrupted(state.session);
      if (played != null) state.audioPlayed.push(played);
      live.interrupted();
      break;
    }
    case "bidi_session_state": sessionState(m.state); break;
    case "bidi_speech_started": $("now-speech").textContent = "speaking"; state.speechEnd = null; break;
    case "bidi_speech_stopped":
      $("now-speech").textContent = "silent";
      speechEnded();
      break;
    case "tool_start": live.toolStart(m.tool_use_id, m.name, m.input); break;
    case "tool_progress": live.toolProgress(m.tool_use_id, m.name, m.message); break;
    case "tool_complete":
      live.toolComplete(m.tool_use_id, m.name, m.result, m.cached);
      live.clientToolEnded(m.tool_use_id, "ok");
      break;
    case "tool_error":
      live.toolError(m.tool_use_id, m.name, m.kind, m.message);
      live.clientToolEnded(m.tool_use_id, m.kind, m.message);
      break;
    case "client_tool_call":
      live.clientTool(m.tool_use_id, m.name, m.input, m.timeout_ms, (result, error) =>
        error == null ? state.session?.toolResult(m.tool_use_id, result) : state.session?.toolFailed(m.tool_use_id, error));
      break;
    case "display_card": live.display(m.card); break;
    case "consent_request":
      live.consent(m.tool_use_id, m.name, m.description, m.input, (approved) => state.session?.consent(m.tool_use_id, approved));
      break;
    case "handoff":
      live.handoff(m.from, m.to, m.context && m.context.reason, m.kind);
      state.agent = m.to;
      reach(m.to);
      renderNow();
      break;
    case "memory_update": remember(m.key, m.value); break;
    case "workflow_transition": {
      const agent = agentName(state.agent);
      const last = state.path[state.path.length - 1];
      if (!last || last.agent !== agent) state.path.push({ agent, nodes: [m.from] });
      state.path[state.path.length - 1].nodes.push(m.to);
      live.step(m.from, m.to, m.by);
      renderNow();
      break;
    }
    case "workflow_line": live.line(m.node, m.text, m.uninterruptible, m.played, m.reason); break;
    case "bidi_session_outage": live.outage(m.agent, m.active, m.message, m.person); break;
    case "bidi_session_fallback": fallback(m); break;
    case "bidi_connection_restart": live.note(`model stream restarted (${m.reason})`); break;
    case "bidi_error":
      if (m.input_id != null) live.refused(m.input_id, m.message);
      if (m.recoverable) live.note(`${m.code}: ${m.message}`, "error");
      else showBanner(`${m.code}: ${m.message}`);
      break;
    case "bidi_connection_close": live.note(`session closed: ${m.reason}`); break;
  }
}

function firstToken() {
  const turn = state.turn;
  if (turn && turn.firstMs == null) turn.firstMs = performance.now() - turn.started;
}

function completeTurn(m) {
  const turn = state.turn && state.turn.serverTurn === m.turn ? state.turn
    : { n: state.turns.length + 1, firstMs: null, firstAudioMs: null, input: 0, output: 0, usages: [] };
  if (turn.started != null) turn.turnMs = performance.now() - turn.started;
  turn.stopReason = m.stop_reason;
  turn.line = live.figures(turn);
  const row = el("tr", { "data-turn": turn.n });
  turn.row = row;
  $("turns").tBodies[0].append(row);
  renderTurn(turn);
  state.turns.push(turn);
  state.turn = null;
}

function renderTurn(turn) {
  turn.cost = turnCost(turn);
  turn.line?.update();
  turn.row?.replaceChildren(...[turn.n, millis(turn.firstMs), millis(turn.firstAudioMs), millis(turn.turnMs), `${turn.input} / ${turn.output}`,
    turn.cost == null ? "–" : `$${turn.cost.toFixed(5)}`].map((v) => el("td", {}, String(v))));
}

// --- cost: each usage at the record's price of the model that answered --------------------
/** The model a usage is priced as, as the record does: the fallback it names (without its
 * `@region`), else the session's model. */
const usageModel = (usage) => (usage.model ? usage.model.split("@")[0] : state.model);

/** Asks the gateway for `model`'s price once (unpriced: its usage shows no cost). */
function loadPrice(model) {
  if (!model || state.prices.has(model)) return;
  state.prices.set(model, null);
  api(`/v1/console/price?model=${encodeURIComponent(model)}`)
    .then((r) => (r.ok ? r.json() : null))
    .then((price) => {
      state.prices.set(model, price);
      for (const turn of state.turns) renderTurn(turn);
      if (state.turn) renderTurn(state.turn);
      renderNow();
    })
    .catch(() => {});
}

/** What `usage` (one bidi_usage) costs at its model's price; null while that is unknown. */
function usageCost(usage) {
  const p = state.prices.get(usageModel(usage));
  if (!p) return null;
  const per = (tokens, usd) => ((tokens || 0) * usd) / 1e6;
  const m = usage.modality;
  return m ? per(m.input_text, p.input) + per(m.output_text, p.output) + per(m.input_speech, p.speech_input) + per(m.output_speech, p.speech_output)
    : per(usage.input_tokens, p.input) + per(usage.output_tokens, p.output);
}

/** The cost of `usages`: null when none is priced (yet). */
function costOf(usages) {
  const costs = usages.map(usageCost).filter((c) => c != null);
  return costs.length ? costs.reduce((a, b) => a + b, 0) : null;
}

function turnCost(turn) { return turn.usages ? costOf(turn.usages) : null; }

function usage(m) {
  // Usage of a turn arrives while it runs, or just after it completes.
  const turn = state.turn || state.turns[state.turns.length - 1];
  state.totals.input += m.input_tokens;
  state.totals.output += m.output_tokens;
  state.usages.push(m);
  loadPrice(usageModel(m));
  if (turn) {
    turn.input += m.input_tokens;
    turn.output += m.output_tokens;
    turn.usages.push(m);
    renderTurn(turn);
  }
  renderNow();
}

/** The agents the session reached (whose redaction rules hold for its memory). */
function reach(agent) {
  if (agent && !state.reached.includes(agent)) state.reached.push(agent);
}

/** A memory change: shown only once the gateway redacted it as the record would (never in
 * the clear; "not shown" if it cannot). A later change of the key wins over a slower answer. */
function remember(key, value) {
  const body = $("memory").tBodies[0];
  let row = [...body.rows].find((r) => r.dataset.key === key);
  const seq = (state.memorySeq[key] = (state.memorySeq[key] || 0) + 1);
  if (value === null) {
    delete state.memory[key];
    row?.remove();
    renderMemory();
    return;
  }
  if (!row) row = body.insertRow();
  row.dataset.key = key;
  row.className = "changed pending";
  row.replaceChildren(el("td", {}, key), el("td", {}, el("pre", {}, "…")));
  renderMemory();
  const show = (text, redacted) => {
    if (state.memorySeq[key] !== seq) return;
    if (redacted !== undefined) state.memory[key] = redacted;
    row.classList.remove("pending");
    row.cells[1].replaceChildren(el("pre", {}, text));
    setTimeout(() => row.classList.remove("changed"), 1500);
  };
  apiPost("/v1/console/redact", { agents: state.reached, values: { [key]: value } })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`answered ${r.status}`))))
    .then((answer) => show(pretty(answer.values[key]), answer.values[key]))
    .catch((e) => show(`(not shown: it could not be redacted: ${e.message})`));
}

function renderMemory() { $("memory-empty").hidden = $("memory").tBodies[0].rows.length > 0; }

function renderNow() {
  $("now-agent").textContent = state.agent ? agentName(state.agent) : "–";
  // The workflow path, per agent; the node is the current agent's.
  $("now-node").textContent = (state.agent && currentNode(agentName(state.agent))) || "–";
  $("now-path").textContent = state.path.length
    ? state.path.map((p) => `${p.agent}: ${p.nodes.join(" → ")}`).join("; ") : "–";
  const cost = costOf(state.usages);
  $("now-tokens").textContent = `${state.totals.input} in / ${state.totals.output} out${cost == null ? "" : ` · $${cost.toFixed(5)}`}`;
  drawGraph();
}

/** The node agent `name` is in: where its last transition took it, else (in a session
 * that reached it) its workflow's entry; null before a session. */
function currentNode(name) {
  const last = state.path[state.path.length - 1];
  if (last && last.agent === name) return last.nodes[last.nodes.length - 1];
  const workflow = agents.get(name)?.workflow;
  return state.sessionId && workflow ? workflow.entry : null;
}

/** The workflow of the agent serving the session (or, before one, of the agent picked). */
function drawGraph() {
  const name = state.agent ? agentName(state.agent) : $("agent").value;
  const entry = agents.get(name);
  const workflow = entry && entry.workflow;
  const visits = state.path.filter((p) => p.agent === name).map((p) => p.nodes);
  const current = currentNode(name);
  graph.draw($("workflow"), name, workflow, current, visits);
  $("workflow-caption").textContent = workflow
    ? `${name}: ${workflow.name}, ${current ? `at ${current}` : `starts at ${workflow.entry}`}`
      + (visits.length ? `; path ${visits.map((v) => v.join(" → ")).join("; ")}` : "")
    : entry ? `${name}: the routing table carries no summary of it (its workflow is not known here).` : "No agent selected.";
}

$("login").onsubmit = (event) => {
  event.preventDefault();
  const key = $("credential").value.trim();
  if (!key) return;
  sessionStorage.setItem(CREDENTIAL, key);
  $("credential").value = "";
  loadAgents().then(() => { $("mic").disabled = $("talk").disabled = agentMode() === "text"; drawGraph(); })
    .catch((e) => live.note(`cannot list agents: ${e}`, "error"));
};
$("connect").onclick = () => { state.voiceSession = false; connect(); };
$("new").onclick = () => connect();
$("restart").onclick = () => connect();
$("reconnect").onclick = () => connect({ resume: true });
$("agent").onchange = () => {
  $("mic").disabled = $("talk").disabled = agentMode() === "text";
  if (!state.session) drawGraph();
};
$("form").onsubmit = (event) => {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!text || !state.session) return;
  const id = state.session.sendText(text, `in-${++state.inputs}`);
  live.typed(text, id);
  $("text").value = "";
};
window.addEventListener("beforeunload", () => { state.leaving = true; });
loadAgents().then(() => { $("mic").disabled = $("talk").disabled = agentMode() === "text"; drawGraph(); })
  .catch((e) => live.note(`cannot list agents: ${e}`, "error"));
renderMemory();
