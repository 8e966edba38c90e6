"use strict";
// Draws a conversation: one bubble per user message and per agent reply (named after the
// agent speaking), handoffs as dividers, tool calls as collapsible cards, consent requests
// with Allow / Deny, client tool calls with a result to send (the console is the client)
// and how each ended, the agent's display cards, workflow lines (said whole, cut or
// skipped), outage notices, per-turn figures. Everything from the server is drawn as text
// (never as markup); a card's link is followed only when it is an http or https URL. The live session (app.js) and a past session opened
// from the record (History) draw with the same Transcript, so both read alike.

/** Builds an element: `el("div", { class: "x", "aria-label": "y" }, child, "text")`. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role") node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
/** `namespace/name` as the record names agents, or a plain name: the name. */
const agentName = (name) => String(name || "").split("/").pop();
const millis = (v) => (v == null ? "–" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`);

class Transcript {
  /** `root`: the element the conversation is drawn into. */
  constructor(root) {
    this.root = root;
    this.clear();
  }

  clear() {
    this.root.replaceChildren();
    this.reply = null; // the agent's bubble being streamed into
    this.tools = new Map(); // tool_use_id -> card
    this.consents = new Map(); // tool_use_id -> consent card
    this.clientTools = new Map(); // tool_use_id -> client tool card
    this.pending = new Map(); // typed input id -> its bubble, until the agent takes it up
  }

  add(node) {
    const atEnd = this.root.scrollHeight - this.root.scrollTop - this.root.clientHeight < 120;
    this.root.append(node);
    if (atEnd) this.root.scrollTop = this.root.scrollHeight;
    return node;
  }

  bubble(role, text, agent) {
    const body = el("div", { class: "text" }, text);
    const who = el("div", { class: "who" }, role === "user" ? "You" : agentName(agent) || "agent");
    const bubble = el("article", { class: `msg ${role}`, "data-agent": role === "user" ? null : agentName(agent) }, who, body);
    bubble.body = body;
    return this.add(bubble);
  }

  /** A line the user typed, shown at once and confirmed when the agent takes it up. */
  typed(text, id) {
    const bubble = this.bubble("user", text);
    bubble.classList.add("pending");
    bubble.dataset.inputId = id;
    this.pending.set(id, bubble);
    // A reply still streaming (spoken) goes on in its own bubble, which its final text
    // completes; the next reply starts a new one.
    return bubble;
  }

  /** The user's final line: the typed bubble it confirms, or a new one (heard speech). */
  user(text, inputId) {
    // As for a typed line: a reply still streaming keeps its bubble.
    const typed = inputId != null && this.pending.get(inputId);
    if (typed) {
      this.pending.delete(inputId);
      typed.classList.remove("pending");
      typed.body.textContent = text;
      return typed;
    }
    return this.bubble("user", text);
  }

  /** A typed line the session refused (`busy`, `empty_text`). */
  refused(inputId, message) {
    const typed = this.pending.get(inputId);
    if (!typed) return;
    this.pending.delete(inputId);
    typed.classList.replace("pending", "refused");
    typed.append(el("div", { class: "why" }, `Not sent: ${message}`));
  }

  /** A streamed piece of the agent's reply. */
  delta(agent, text) {
    if (!this.reply || this.reply.dataset.agent !== agentName(agent)) {
      this.reply = this.bubble("assistant", "", agent);
      this.reply.classList.add("streaming");
    }
    this.reply.body.textContent += text;
  }

  /** The agent's whole reply (or, by voice, what was really spoken). */
  assistant(agent, text) {
    const reply = this.reply && this.reply.dataset.agent === agentName(agent) ? this.reply : null;
    this.reply = null;
    if (!text) {
      if (reply && !reply.body.textContent) reply.remove();
      return null;
    }
    const bubble = reply || this.bubble("assistant", "", agent);
    bubble.body.textContent = text;
    bubble.classList.remove("streaming");
    return bubble;
  }

  /** The reply was cut short (barge-in or cancel). */
  interrupted() {
    if (this.reply) this.reply.classList.add("interrupted");
    this.reply = null;
  }

  handoff(from, to, reason, kind) {
    this.reply = null;
    const label = `${agentName(from)} → ${agentName(to)}`;
    return this.add(
      el("div", { class: "divider", role: "separator", "aria-label": `Handoff ${label}`, "data-from": agentName(from), "data-to": agentName(to) },
        el("span", { class: "route" }, `${kind === "return" ? "Back" : "Handoff"}: ${label}`),
        reason ? el("span", { class: "reason" }, reason) : null));
  }

  toolStart(id, name, input) {
    this.reply = null;
    const status = el("span", { class: "status" }, "running…");
    const card = el("details", { class: "tool running", "data-tool": name, "data-id": id },
      el("summary", {}, el("span", { class: "name" }, `Tool ${name}`), status),
      el("div", { class: "label" }, "Input"), el("pre", {}, pretty(input ?? {})));
    card.status = status;
    card.started = performance.now();
    this.tools.set(id, card);
    return this.add(card);
  }

  card(id, name) {
    return this.tools.get(id) || this.toolStart(id, name, null);
  }

  toolProgress(id, name, message) {
    this.card(id, name).status.textContent = message;
  }

  /** `durationMs`: from the record, else measured here since `tool_start`. */
  toolComplete(id, name, result, cached, durationMs) {
    const card = this.card(id, name);
    const took = durationMs ?? performance.now() - card.started;
    card.classList.replace("running", "ok");
    card.status.textContent = `done · ${millis(took)}${cached ? " · cached" : ""}`;
    card.append(el("div", { class: "label" }, "Result"), el("pre", {}, pretty(result)));
  }

  toolError(id, name, kind, message, durationMs) {
    const card = this.card(id, name);
    const took = durationMs ?? performance.now() - card.started;
    card.classList.replace("running", "failed");
    card.status.textContent = `failed (${kind}) · ${millis(took)}`;
    card.append(el("div", { class: "label" }, "Error"), el("pre", {}, message));
    card.open = true;
  }

  /** A consent request; `answer(approved)` sends the answer (none: read-only). */
  consent(id, name, description, input, answer) {
    this.reply = null;
    const buttons = el("div", { class: "actions" });
    const card = el("div", { class: "consent", role: "group", "aria-label": `Consent for ${name}`, "data-id": id },
      el("div", { class: "name" }, `${name} asks to run`),
      el("div", {}, description), el("pre", {}, pretty(input)), buttons);
    card.buttons = buttons;
    this.consents.set(id, card);
    if (answer) {
      for (const [label, approved] of [["Allow", true], ["Deny", false]]) {
        buttons.append(el("button", { type: "button", class: approved ? "allow" : "deny", onclick: () => {
          answer(approved);
          this.consentAnswered(id, approved);
        } }, label));
      }
    }
    this.add(card);
    buttons.querySelector("button")?.focus();
    return card;
  }

  /** A client tool call (`client_tool_call`): the console is the client, so the person
   * answers — a JSON result, or that the app cannot do it. `answer(result, error)` sends
   * the answer (none: read-only). */
  clientTool(id, name, input, timeoutMs, answer) {
    this.reply = null;
    const buttons = el("div", { class: "actions" });
    const result = el("textarea", { class: "result", rows: 3, "aria-label": `Result of ${name}`, value: "{}" });
    const problem = el("div", { class: "problem", role: "alert" });
    const card = el("div", { class: "client-tool", role: "group", "aria-label": `Client tool ${name}`, "data-id": id, "data-tool": name },
      el("div", { class: "name" }, `${name} runs in this client`),
      el("div", { class: "label" }, `Input · answer within ${millis(timeoutMs)}`), el("pre", {}, pretty(input ?? {})),
      answer ? result : null, problem, buttons);
    card.buttons = buttons;
    card.result = result;
    const done = (text) => buttons.replaceChildren(el("span", { class: "answered" }, text));
    if (answer) {
      buttons.append(
        el("button", { type: "button", class: "allow", onclick: () => {
          let value;
          try { value = JSON.parse(result.value); } catch (e) { problem.textContent = `Not JSON: ${e.message}`; return; }
          problem.textContent = "";
          answer(value, null);
          result.disabled = true;
          done("Result sent");
        } }, "Send result"),
        el("button", { type: "button", class: "deny", onclick: () => {
          answer(null, `the person at the console could not run ${name}`);
          result.disabled = true;
          done("Answered: cannot do it");
        } }, "Cannot do it"));
    }
    this.clientTools.set(id, card);
    this.add(card);
    return card;
  }

  /** How a client tool call ended, as the agent's tool_complete or tool_error says: the
   * result taken, refused (client_bad_result), the client's error, or no answer in time
   * (client_timeout: nobody here answered, so the server's timeout applied). */
  clientToolEnded(id, kind, message) {
    const card = this.clientTools.get(id);
    if (!card) return;
    const words = {
      ok: "The agent took the result.",
      client_bad_result: `The agent refused the result: ${message}`,
      client_error: "The agent was told the client could not do it.",
      client_timeout: "Nobody answered in time: the agent was told the client has no answer.",
    };
    card.dataset.outcome = kind;
    card.classList.add(kind === "ok" ? "settled" : "unsettled");
    card.result.disabled = true;
    card.buttons.replaceChildren(el("span", { class: "answered" }, words[kind] || `${kind}: ${message}`));
  }

  /** A card the agent shows (`display_card`): a title, text, fields and a link. */
  display(card) {
    this.reply = null;
    const text = (value) => (value == null ? "" : String(value));
    const fields = (card.fields || []).map((f) => el("div", { class: "field" }, el("dt", {}, text(f.label)), el("dd", {}, text(f.value))));
    let link = null;
    // Only web links are followed (the server checks them too); anything else is shown as
    // text, not as a link.
    const url = webUrl(card.link?.url);
    if (url) link = el("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text(card.link.label) || url);
    else if (card.link) link = el("p", { class: "bad-link" }, `(a link that is not a web address: ${text(card.link.url)})`);
    return this.add(el("section", { class: "display-card", role: "region", "aria-label": `Card ${text(card.title)}` },
      el("h3", {}, text(card.title)),
      card.text ? el("p", {}, text(card.text)) : null,
      fields.length ? el("dl", {}, ...fields) : null,
      link));
  }

  /** A workflow node's spoken line is over (`workflow_line`): said whole, cut by the
   * caller, or skipped because it was not said in time. */
  line(node, text, uninterruptible, played, reason) {
    this.reply = null;
    const words = {
      whole: uninterruptible ? `The agent said the ${node} step's line in full; the caller could not cut it:`
        : `The agent said the ${node} step's line in full:`,
      cut: `The caller cut short the ${node} step's line:`,
      abandoned: `The ${node} step's line was not said in time, so it was skipped${reason ? ` (${reason})` : ""}:`,
    };
    return this.add(el("div", { class: `note line ${played}`, "data-node": node, "data-played": played },
      words[played] || `The ${node} step's line (${played}):`, " ", el("q", {}, text)));
  }

  /** The Agent serving the session went into outage mode (`active`) or out of it
   * (`bidi_session_outage`): this conversation goes on; new ones go to the fallback. */
  outage(agent, active, message, person) {
    this.reply = null;
    const name = agentName(agent);
    const words = active
      ? [el("strong", {}, `${name} is in outage mode.`), " This conversation goes on; new conversations go to the fallback.",
        message ? el("div", {}, "Tell the caller: ", el("q", {}, message)) : null,
        person ? el("div", {}, `Or put them through to ${person.name} (${person.address}).`) : null]
      : [el("strong", {}, `${name} is out of outage mode.`), " New conversations are served again."];
    return this.add(el("div", { class: `notice outage ${active ? "on" : "off"}`, role: "status", "data-active": String(active) },
      ...words));
  }

  consentAnswered(id, approved) {
    const card = this.consents.get(id);
    if (!card) return;
    card.buttons.replaceChildren(el("span", { class: approved ? "allowed" : "denied" }, approved ? "Allowed" : "Denied"));
  }

  /** The figures of one turn (first token; by voice, first audio after the caller's speech
   * ended), kept up to date by `update`. */
  figures(turn) {
    const line = el("div", { class: "figures", "data-turn": turn.n });
    const update = () => {
      const parts = [`turn ${turn.n}`, `first token ${millis(turn.firstMs)}`];
      if (turn.firstAudioMs != null) parts.push(`first audio ${millis(turn.firstAudioMs)}`);
      parts.push(`turn ${millis(turn.turnMs)}`);
      if (turn.input || turn.output) parts.push(`${turn.input} in / ${turn.output} out tokens`);
      if (turn.cost) parts.push(`$${turn.cost.toFixed(5)}`);
      line.textContent = parts.join(" · ");
    };
    update();
    line.update = update;
    return this.add(line);
  }

  /** The workflow moved from node `from` to `to`. */
  step(from, to, by) {
    return this.add(el("div", { class: "note step", "data-to": to }, `step ${from} → ${to}${by ? ` (${by})` : ""}`));
  }

  note(text, cls = "note") {
    return this.add(el("div", { class: cls }, text));
  }
}

/** `url` when it is an http or https URL, else null. */
function webUrl(url) {
  if (typeof url !== "string") return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
  } catch {
    return null;
  }
}

window.Transcript = Transcript;
window.el = el;
window.agentName = agentName;
window.millis = millis;
window.pretty = pretty;
