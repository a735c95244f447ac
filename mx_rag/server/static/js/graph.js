// SPDX-License-Identifier: Apache-2.0
// The entities around an answer of the `graph` chain: a small force layout drawn as SVG, and a
// list of the entities as buttons (the keyboard path); choosing one names its supporting passages.
//
// graph = {nodes: [{id, label, passages: [indices into sources]}], edges: [{source, target, label}]}

import { el } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const MAX_NODES = 150;

/** The graph's nodes (at most MAX_NODES, unique ids) and the edges between them. */
export function cleanGraph(graph) {
  const nodes = [];
  const seen = new Set();
  for (const node of (graph && Array.isArray(graph.nodes) ? graph.nodes : [])) {
    if (!node || node.id === undefined || seen.has(String(node.id)) || nodes.length >= MAX_NODES) continue;
    seen.add(String(node.id));
    nodes.push({
      id: String(node.id),
      label: String(node.label ?? node.id),
      passages: Array.isArray(node.passages) ? node.passages.filter(Number.isInteger) : [],
    });
  }
  const edges = (graph && Array.isArray(graph.edges) ? graph.edges : [])
    .filter((e) => e && seen.has(String(e.source)) && seen.has(String(e.target)) && e.source !== e.target)
    .map((e) => ({ source: String(e.source), target: String(e.target), label: String(e.label ?? "") }));
  return { nodes, edges };
}

/**
 * Positions {id: {x, y}} inside width x height (margins kept free), by Fruchterman-Reingold:
 * every pair repels, every edge pulls, the step shrinks each round. Deterministic: the nodes
 * start on a circle in their order.
 */
export function layout(graph, { width = 640, height = 360, iterations = 300, marginX = 70, marginY = 30 } = {}) {
  const { nodes, edges } = cleanGraph(graph);
  const n = nodes.length;
  const pos = new Map();
  const cx = width / 2;
  const cy = height / 2;
  nodes.forEach((node, i) => {
    const angle = (2 * Math.PI * i) / Math.max(n, 1);
    const r = n > 1 ? Math.min(width, height) / 3 : 0;
    pos.set(node.id, { x: cx + r * Math.cos(angle), y: cy + r * Math.sin(angle) });
  });
  const k = Math.sqrt(((width - 2 * marginX) * (height - 2 * marginY)) / Math.max(n, 1)) * 0.8;
  let step = width / 10;
  for (let round = 0; round < iterations && n > 1; round++) {
    const shift = new Map(nodes.map((node) => [node.id, { x: 0, y: 0 }]));
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const a = pos.get(nodes[i].id);
        const b = pos.get(nodes[j].id);
        let dx = a.x - b.x;
        let dy = a.y - b.y;
        let d = Math.hypot(dx, dy);
        if (d < 0.01) { dx = 0.01 * (i - j); dy = 0.01; d = Math.hypot(dx, dy); }
        const force = (k * k) / d;
        const sa = shift.get(nodes[i].id);
        const sb = shift.get(nodes[j].id);
        sa.x += (dx / d) * force; sa.y += (dy / d) * force;
        sb.x -= (dx / d) * force; sb.y -= (dy / d) * force;
      }
    }
    for (const edge of edges) {
      const a = pos.get(edge.source);
      const b = pos.get(edge.target);
      const dx = a.x - b.x;
      const dy = a.y - b.y;
      const d = Math.max(Math.hypot(dx, dy), 0.01);
      const force = (d * d) / k;
      const sa = shift.get(edge.source);
      const sb = shift.get(edge.target);
      sa.x -= (dx / d) * force; sa.y -= (dy / d) * force;
      sb.x += (dx / d) * force; sb.y += (dy / d) * force;
    }
    for (const node of nodes) {
      const p = pos.get(node.id);
      const s = shift.get(node.id);
      const len = Math.max(Math.hypot(s.x, s.y), 0.01);
      p.x += (s.x / len) * Math.min(len, step);
      p.y += (s.y / len) * Math.min(len, step);
      p.x = Math.min(width - marginX, Math.max(marginX, p.x)); // room for a label either side
      p.y = Math.min(height - marginY, Math.max(marginY, p.y));
    }
    step = Math.max(step * 0.97, 0.5);
  }
  return Object.fromEntries(pos);
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/**
 * The graph view: an SVG drawing and a list of entity buttons. `onSelect(node)` is called with
 * the chosen entity (its `passages` are indices into the answer's sources). Returns the element.
 */
export function renderGraph(graph, onSelect = () => {}) {
  const { nodes, edges } = cleanGraph(graph);
  const width = 640;
  const height = 360;
  const pos = layout({ nodes, edges }, { width, height });
  const drawing = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "graph-drawing", role: "img",
    "aria-label": `Entities around the answer: ${nodes.length} entities, ${edges.length} relations` });
  for (const edge of edges) {
    const a = pos[edge.source];
    const b = pos[edge.target];
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge" });
    const title = svg("title");
    title.textContent = edge.label;
    line.append(title);
    drawing.append(line);
  }
  const circles = new Map();
  const buttons = new Map();
  const select = (node) => {
    for (const [id, c] of circles) c.classList.toggle("selected", id === node.id);
    for (const [id, b] of buttons) b.setAttribute("aria-pressed", String(id === node.id));
    onSelect(node);
  };
  for (const node of nodes) {
    const p = pos[node.id];
    const group = svg("g", { class: "node", "data-id": node.id });
    group.append(svg("circle", { cx: p.x, cy: p.y, r: 7 + Math.min(node.passages.length, 5) }));
    const text = svg("text", { x: p.x, y: p.y - 12, "text-anchor": "middle" });
    text.textContent = node.label.length > 28 ? node.label.slice(0, 27) + "…" : node.label;
    group.append(text);
    group.addEventListener("click", () => select(node));
    circles.set(node.id, group);
    drawing.append(group);
  }
  const list = el("ul", { class: "entities", "aria-label": "Entities" },
    nodes.map((node) => {
      const button = el("button", { type: "button", "aria-pressed": "false", "data-id": node.id,
        onclick: () => select(node) }, node.label, el("span", { class: "count" }, ` (${node.passages.length})`));
      buttons.set(node.id, button);
      return el("li", {}, button);
    }));
  return el("div", { class: "graph" }, el("h4", {}, "Entities"), drawing, list);
}
