"use strict";
// The current agent's workflow as a graph: plain SVG drawn here, no library (a layered
// drawing of a few dozen nodes is a hundred lines; a graph library would outweigh the page).
// Nodes are laid out top to bottom by their distance from the entry node; edges that go
// forward are straight arrows, edges that go back or sideways curve round the right. The
// current node is filled, the nodes and edges of the path taken so far are marked, edges
// the core takes by itself (`when`) are dashed. Each node names itself (kind, instruction)
// for screen readers and on hover; the whole graph has a text summary.

const graph = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const WIDTH = 320, ROW = 62, BOX_H = 26, TOP = 12;

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v != null) node.setAttribute(k, v);
    for (const c of children) if (c != null) node.append(c);
    return node;
  }

  /** Distance of each node from `entry` (breadth first); unreachable nodes go last. */
  function layers(workflow) {
    const depth = new Map([[workflow.entry, 0]]);
    const queue = [workflow.entry];
    while (queue.length) {
      const id = queue.shift();
      for (const e of workflow.edges || []) {
        if (e.from === id && !depth.has(e.to)) {
          depth.set(e.to, depth.get(id) + 1);
          queue.push(e.to);
        }
      }
    }
    const deepest = Math.max(0, ...depth.values());
    for (const n of workflow.nodes) if (!depth.has(n.id)) depth.set(n.id, deepest + 1);
    return depth;
  }

  /** Where each node goes: `{ x, y, w }` (centre top, width). */
  function place(workflow) {
    const depth = layers(workflow);
    const rows = new Map();
    for (const n of workflow.nodes) {
      const d = depth.get(n.id);
      if (!rows.has(d)) rows.set(d, []);
      rows.get(d).push(n.id);
    }
    const at = new Map();
    for (const [d, ids] of rows) {
      const slot = (WIDTH - 40) / ids.length;
      ids.forEach((id, i) => at.set(id, { x: 10 + slot * (i + 0.5), y: TOP + d * ROW, w: Math.min(slot - 8, 150) }));
    }
    return { at, rows: Math.max(...rows.keys()) + 1 };
  }

  /** The edges taken, `from>to`, along `nodes` (one agent's visits, in order). */
  function taken(visits) {
    const edges = new Set();
    for (const nodes of visits) for (let i = 1; i < nodes.length; i++) edges.add(`${nodes[i - 1]}>${nodes[i]}`);
    return edges;
  }

  /**
   * Draws `workflow` into `root` (an <svg>): `current` the node the session is in (null:
   * none yet), `visits` the lists of nodes this agent went through.
   */
  function draw(root, agent, workflow, current, visits) {
    root.replaceChildren();
    const known = Boolean(workflow && workflow.nodes && workflow.nodes.length);
    root.style.display = known ? "" : "none";
    if (!known) return;
    const { at, rows } = place(workflow);
    const height = TOP + rows * ROW;
    root.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
    root.setAttribute("data-agent", agent);
    root.setAttribute("data-workflow", workflow.name || "");
    const seen = new Set(visits.flat());
    const walked = taken(visits);
    const path = visits.length ? visits[visits.length - 1].join(" → ") : "none yet";
    root.append(svg("title", {}, `Workflow ${workflow.name || ""} of ${agent}: ${workflow.nodes.length} nodes; `
      + `current node ${current || "none"}; path ${path}`));
    root.append(svg("defs", {}, ...["edge", "taken"].map((kind) => svg("marker", {
      id: `arrow-${kind}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
    }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: `arrowhead arrowhead-${kind}` })))));
    const edges = svg("g", { class: "edges" });
    for (const e of workflow.edges || []) {
      const a = at.get(e.from), b = at.get(e.to);
      if (!a || !b) continue;
      const isTaken = walked.has(`${e.from}>${e.to}`);
      let d;
      if (b.y > a.y) {
        d = `M${a.x},${a.y + BOX_H} L${b.x},${b.y - 2}`;
      } else {
        // Back or sideways: round the right of both boxes.
        const x1 = a.x + a.w / 2, x2 = b.x + b.w / 2, bend = Math.max(x1, x2) + 18 + Math.abs(a.y - b.y) / 8;
        d = `M${x1},${a.y + BOX_H / 2} C${bend},${a.y + BOX_H / 2} ${bend},${b.y + BOX_H / 2} ${x2 + 2},${b.y + BOX_H / 2}`;
      }
      edges.append(svg("path", {
        d, class: `edge${isTaken ? " taken" : ""}${e.when ? " auto" : ""}`, "data-from": e.from, "data-to": e.to,
        "marker-end": `url(#arrow-${isTaken ? "taken" : "edge"})`,
      }, svg("title", {}, `${e.from} → ${e.to}${e.description ? `: ${e.description}` : ""}${e.when ? " (taken by the core when its condition holds)" : ""}`)));
    }
    root.append(edges);
    for (const n of workflow.nodes) {
      const p = at.get(n.id);
      const state = n.id === current ? "current" : seen.has(n.id) ? "visited" : "";
      const label = n.id.length * 6.5 > p.w - 8 ? `${n.id.slice(0, Math.max(3, Math.floor((p.w - 8) / 6.5) - 1))}…` : n.id;
      root.append(svg("g", {
        class: `node kind-${n.kind || "message"} ${state}`.trim(), "data-node": n.id, "data-kind": n.kind || "message",
        "aria-current": n.id === current ? "step" : null,
      },
      svg("title", {}, `${n.id} (${n.kind || "message"}${n.id === current ? ", current" : ""})${n.instruction ? `: ${n.instruction}` : ""}`),
      svg("rect", { x: p.x - p.w / 2, y: p.y, width: p.w, height: BOX_H, rx: n.kind === "decision" ? 2 : 12 }),
      svg("text", { x: p.x, y: p.y + BOX_H / 2 + 4, "text-anchor": "middle" }, label)));
    }
  }

  return { draw, layers };
})();

window.graph = graph;
