"use strict";
// The Agents panel: every agent of the folder (`GET /v1/agents`, built from the loaded
// resources) with its mode, role, description, avatar, persona, voice, tools and handoff
// targets; those a session cannot start with are marked as reached by handoff. `agents.get`
// gives an agent's entry (its workflow feeds the graph).

const agents = (() => {
  const byName = new Map();

  // Keyed by plain name: the gateway's console lists `namespace/name`, events name either.
  const get = (name) => byName.get(agentName(name)) || null;

  /** An avatar only from what the CRD allows (`http(s)://` or `data:image/`). */
  function avatar(entry) {
    const src = entry.avatar;
    if (!src || !/^(https?:\/\/|data:image\/)/.test(src)) {
      return el("span", { class: "avatar initial", "aria-hidden": "true" }, entry.name.slice(0, 1).toUpperCase());
    }
    const img = el("img", { class: "avatar", src, alt: "" });
    img.onerror = () => img.replaceWith(el("span", { class: "avatar initial", "aria-hidden": "true" }, entry.name.slice(0, 1).toUpperCase()));
    return img;
  }

  function fact(term, value) {
    return value ? [el("dt", {}, term), el("dd", {}, value)] : [];
  }

  function card(entry, startable) {
    const p = entry.persona || {};
    const tools = el("ul", { class: "tools" }, ...(entry.tools || []).map((t) =>
      el("li", { "data-tool": t.name, title: t.description },
        el("span", { class: "name" }, t.name),
        el("span", { class: "meta" }, ` ${t.runs}${t.consent ? " · asks consent" : ""}${t.cache_ttl_seconds ? ` · cached ${t.cache_ttl_seconds} s` : ""}`))));
    const handoffs = (entry.handoffs || []).map((h) => h.agent).join(", ");
    // Through the gateway an Agent the routing table has no summary of has no persona or workflow.
    const workflow = entry.workflow ? `${entry.workflow.name} (${entry.workflow.nodes.length} nodes, entry ${entry.workflow.entry})` : "";
    const summary = el("summary", {}, avatar(entry),
      el("span", { class: "who" }, el("span", { class: "name" }, entry.name),
        el("span", { class: "meta" }, [entry.mode, entry.role, startable ? null : "by handoff"].filter(Boolean).join(" · "))));
    return el("li", {}, el("details", { class: "agent", "data-agent": entry.name, "data-mode": entry.mode }, summary,
      entry.description ? el("p", { class: "description" }, entry.description) : null,
      el("dl", { class: "facts" },
        ...fact("Persona", p.display_name ? `${p.display_name} (${p.name})` : p.name),
        ...fact("Voice", entry.mode === "text" || !p.voice ? null : `${p.voice} · ${p.language}`),
        ...fact("Language", entry.mode === "text" ? p.language : null),
        ...fact("Greeting", p.greeting),
        ...fact("Handoffs", handoffs || "none"),
        ...fact("Workflow", workflow)),
      el("div", { class: "label" }, `Tools (${(entry.tools || []).length})`), tools));
  }

  /** Draws the list `body` (the answer of /v1/agents). */
  function show(body) {
    byName.clear();
    const items = [];
    for (const entry of body.agents || []) { byName.set(agentName(entry.name), entry); items.push(card(entry, true)); }
    for (const entry of body.by_handoff || []) { byName.set(agentName(entry.name), entry); items.push(card(entry, false)); }
    $("agents").replaceChildren(...items);
  }

  return { show, get };
})();

window.agents = agents;
