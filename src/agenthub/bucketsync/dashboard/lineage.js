// A work's lineage (GET /v1/lineage/{name}) as an inline SVG: what it builds on to the
// left by depth, what builds on it to the right, one arrow per builds_on edge (from the
// builder to the work it names). Results link to their page; text goes in as text.

const SVG = "http://www.w3.org/2000/svg";
const COL = 190, ROW = 46, BOX_W = 170, BOX_H = 34, PAD = 10;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function label(node, format) {
  const who = node.agent || "?";
  if (node.kind === "result") return `${who} · ${node.score === null || node.score === undefined ? "—" : format(node.score)}`;
  return `${who} · ${node.kind.replace("_", " ")}`;
}

// data: the route's answer; format: how a score is written. Returns an <svg> (or a note).
export function lineageGraph(data, { format = String } = {}) {
  const columns = new Map();
  const place = (node, column) => {
    if (!columns.has(column)) columns.set(column, []);
    columns.get(column).push(node);
  };
  place(data.node, 0);
  for (const node of data.ancestors) place(node, -node.depth);
  for (const node of data.descendants) place(node, node.depth);
  if (columns.size === 1) {
    const note = document.createElement("p");
    note.className = "muted";
    note.id = "lineage-graph";
    note.textContent = "Nothing it builds on, nothing built on it yet.";
    return note;
  }
  const keys = [...columns.keys()].sort((a, b) => a - b);
  const tallest = Math.max(...[...columns.values()].map((c) => c.length));
  const width = keys.length * COL + PAD, height = tallest * ROW + ROW + PAD;
  const at = new Map();
  keys.forEach((key, i) => columns.get(key).forEach((node, j) => at.set(node.name, { x: PAD + i * COL, y: PAD + j * ROW, node, key })));
  const root = svg("svg", { id: "lineage-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `lineage of ${data.node.name}` });
  const defs = svg("defs");
  const marker = svg("marker", { id: "lineage-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 8, markerHeight: 8, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", fill: "#64748b" }));
  defs.append(marker);
  root.append(defs);
  for (const [builder, named] of data.edges) {
    const from = at.get(builder), to = at.get(named);
    if (!from || !to) continue;
    // Builders sit right of what they name: the arrow runs leftwards, builder -> work. An
    // edge skipping a column bows below the boxes between, so it is never hidden by them.
    const x1 = from.x, y1 = from.y + BOX_H / 2, x2 = to.x + BOX_W, y2 = to.y + BOX_H / 2;
    const skips = Math.abs(from.key - to.key) > 1;
    const d = skips
      ? `M${x1},${from.y + BOX_H} C${x1 - COL / 2},${y1 + ROW} ${x2 + COL / 2},${y2 + ROW} ${x2 - 10},${to.y + BOX_H}`
      : `M${x1},${y1} L${x2},${y2}`;
    root.append(svg("path", { class: "lineage-edge", "data-from": builder, "data-to": named, d, fill: "none", stroke: "#64748b", "stroke-width": 1.2, "marker-end": "url(#lineage-arrow)" }));
  }
  for (const { x, y, node, key } of at.values()) {
    const group = svg("g", { class: `lineage-node ${key === 0 ? "lineage-self" : ""}`, "data-name": node.name, "data-kind": node.kind });
    group.append(svg("rect", { x, y, width: BOX_W, height: BOX_H, rx: 5, fill: key === 0 ? "#dbeafe" : "#f8fafc", stroke: key === 0 ? "#2563eb" : "#94a3b8" }));
    group.append(svg("text", { x: x + 8, y: y + 14, "font-size": 12 }, label(node, format)));
    group.append(svg("text", { x: x + 8, y: y + 28, "font-size": 10, fill: "#64748b" }, node.name.length > 26 ? `…${node.name.slice(-25)}` : node.name));
    group.append(svg("title", {}, node.path));
    if (node.kind === "result" && key !== 0) {
      const link = svg("a", { href: `#/result/${encodeURIComponent(node.name)}` });
      link.append(group);
      root.append(link);
    } else root.append(group);
  }
  return root;
}
