// Best score so far, one step line per agent, as an SVG drawn at its container's width.
// The points come from GET /v1/leaderboard?best_per_agent=false: the server's eligibility
// and exclusions (negative, malformed, filtered verification) and its order, so the chart
// and the table cannot disagree; baselines are dashed reference lines.

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const H = 260, PAD = { left: 58, right: 14, top: 12, bottom: 44 };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// rows: the server's ranked rows of every eligible submission, best first. An agent's
// best so far at a time is its earliest-listed row submitted by then, so walking the
// submissions in time order, a row is a new best iff it is listed before the agent's
// current best. Returns Map(agent -> [{time, score, filename}]) of those improvements.
export function bestSoFar(rows) {
  const position = new Map(rows.map((row, i) => [row.filename, i]));
  const byTime = [...rows].sort((a, b) => new Date(a.timestamp) - new Date(b.timestamp) || position.get(a.filename) - position.get(b.filename));
  const best = new Map(), series = new Map();
  for (const row of byTime) {
    const at = position.get(row.filename);
    if (best.has(row.agent) && best.get(row.agent) <= at) continue;
    best.set(row.agent, at);
    if (!series.has(row.agent)) series.set(row.agent, []);
    series.get(row.agent).push({ time: new Date(row.timestamp), score: row.score, filename: row.filename });
  }
  return series;
}

export function scoreChart(series, { baselines = [], field = "score", unit = "", format = String, width = 640 } = {}) {
  const all = [...series.values()].flat();
  const figure = document.createElement("figure");
  figure.className = "chart";
  if (all.length === 0) {
    figure.append("No scored results yet.");
    return figure;
  }
  const W = Math.max(300, Math.min(900, Math.round(width)));
  const scores = [...all.map((p) => p.score), ...baselines.map((b) => b.score)];
  let [t0, t1] = [Math.min(...all.map((p) => p.time)), Math.max(...all.map((p) => p.time))];
  let [s0, s1] = [Math.min(...scores), Math.max(...scores)];
  if (t0 === t1) { t0 -= 60_000; t1 += 60_000; }
  if (s0 === s1) { s0 -= Math.abs(s0) * 0.1 || 1; s1 += Math.abs(s1) * 0.1 || 1; }
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const y = (s) => H - PAD.bottom - ((s - s0) / (s1 - s0)) * (H - PAD.top - PAD.bottom);

  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `best ${field} so far per agent over time` });
  root.append(svg("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, class: "axis" }));
  root.append(svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, class: "axis" }));
  for (const s of [s0, (s0 + s1) / 2, s1]) {
    root.append(svg("text", { x: PAD.left - 6, y: y(s) + 4, "text-anchor": "end", class: "tick" }, format(s)));
  }
  const short = t1 - t0 < 3_600_000; // under an hour: show seconds
  for (const t of [t0, t1]) {
    const stamp = new Date(t).toISOString();
    root.append(svg("text", { x: x(t), y: H - PAD.bottom + 16, "text-anchor": t === t0 ? "start" : "end", class: "tick" },
      short ? stamp.slice(11, 19) : stamp.slice(5, 16).replace("T", " ")));
  }
  root.append(svg("text", { x: (PAD.left + W - PAD.right) / 2, y: H - 6, "text-anchor": "middle", class: "axis-title", "data-axis": "x" }, "submitted (UTC)"));
  root.append(svg("text", { x: 14, y: (PAD.top + H - PAD.bottom) / 2, "text-anchor": "middle", class: "axis-title", "data-axis": "y",
    transform: `rotate(-90 14 ${(PAD.top + H - PAD.bottom) / 2})` }, `best ${field}${unit ? ` (${unit})` : ""}`));
  for (const b of baselines) {
    const line = svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(b.score), y2: y(b.score), class: "baseline-line", "data-baseline": b.agent });
    line.append(svg("title", {}, `baseline ${b.agent}: ${format(b.score)}`));
    root.append(line);
  }
  const legend = document.createElement("ul");
  legend.className = "legend";
  [...series.keys()].sort().forEach((agent, i) => {
    const color = PALETTE[i % PALETTE.length];
    const points = series.get(agent);
    // A step line: the best holds until the next improvement, and to the chart's end.
    const steps = [];
    points.forEach((p, k) => {
      if (k > 0) steps.push([x(p.time), y(points[k - 1].score)]);
      steps.push([x(p.time), y(p.score)]);
    });
    steps.push([x(t1), y(points[points.length - 1].score)]);
    root.append(svg("polyline", {
      points: steps.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" "),
      fill: "none", stroke: color, "stroke-width": 2, "data-agent": agent,
    }));
    for (const p of points) {
      const dot = svg("circle", { cx: x(p.time).toFixed(1), cy: y(p.score).toFixed(1), r: 4, fill: color,
        "data-agent": agent, "data-score": p.score, "data-filename": p.filename });
      dot.append(svg("title", {}, `${agent}: best ${format(p.score)}${unit ? " " + unit : ""} from ${p.time.toISOString()}`));
      root.append(dot);
    }
    const key = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = color;
    key.append(swatch, `${agent} (${format(points[points.length - 1].score)})`);
    legend.append(key);
  });
  if (baselines.length) {
    const key = document.createElement("li");
    key.className = "baseline-key";
    key.append("- - baseline");
    legend.append(key);
  }
  figure.append(root, legend);
  return figure;
}
